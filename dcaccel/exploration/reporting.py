"""The sweep's warnings, each said once per workload and process: those of a DAG extraction, and why a
workload's DAGs are not composed from fragments.
"""

import warnings

#: (workload, message) pairs already reported: the assignments of a sweep share most of their warnings.
_REPORTED: set[tuple[str, str]] = set()


def warn_once(workload_name: str, caught: list[warnings.WarningMessage]) -> None:
    """Re-issue the warnings of one DAG extraction that this process has not reported for the workload."""
    for warning in caught:
        key = (workload_name, str(warning.message))
        if key not in _REPORTED:
            _REPORTED.add(key)
            warnings.warn(f"{workload_name}: {warning.message}", warning.category, stacklevel=3)


def report_composition(workload_name: str, reason: str | None) -> None:
    """Say once per workload and process why its DAGs are not composed from fragments."""
    if reason is not None and (workload_name, reason) not in _REPORTED:
        _REPORTED.add((workload_name, reason))
        warnings.warn(
            f"{workload_name}: DAGs not composed from fragments ({reason}); every assignment is lowered whole",
            UserWarning,
            stacklevel=4,
        )
