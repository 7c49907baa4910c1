"""The learned cost model (docs/costmodel.md): measure the tasks of lowered programs on this machine's CPU,
learn their latency from the SDFG (hand features, IR tokens), and evaluate on held-out workload families.

:mod:`~dcaccel.costmodel.timer` (a nanosecond timer in the generated code) → :mod:`~dcaccel.costmodel.measure`
(one row per task and copy) and :mod:`~dcaccel.costmodel.features` (what the models read) →
:mod:`~dcaccel.costmodel.models` (gradient boosting, a sequence model, the scaled analytic baseline) →
:mod:`~dcaccel.costmodel.evaluate` (metrics, leave-one-family-out folds).
"""
