"""Float16 scalar arguments of DaCe programs.

DaCe passes a scalar argument (a 0-d weight or input) by value, converted to the ctypes type of its element type.
A float16's is ``c_ushort`` (``dace::float16`` is a struct of one ``uint16_t``, which the calling convention passes
as an unsigned short), and DaCe converts the value with ``c_ushort(numpy.float16(value))``, which raises
``TypeError: Invalid type for scalar argument "c": 'numpy.float16' object cannot be interpreted as an integer``: no
program with a float16 scalar argument ran (the scalar factor of a float16 model's ``Mul``, the float16 ``start``
and ``delta`` of a ``Range``). :func:`install_half_scalar_arguments` makes DaCe pass such a value as its 16 bits.
"""

import ctypes
import functools

import dace
import numpy as np


@functools.cache
def install_half_scalar_arguments() -> None:
    """Make DaCe's conversion of a program's arguments (``dace.data.make_ctypes_argument``, which a compiled program
    looks up in that module on every call) pass a float16 scalar as the ``c_ushort`` of its bits, and every other
    argument as DaCe does; once."""
    convert = dace.data.make_ctypes_argument

    def make_ctypes_argument(arg, argtype, *args, argument_to_pyobject=None, **kwargs):
        if type(argtype) is not dace.data.Scalar or argtype.dtype != dace.float16:
            return convert(arg, argtype, *args, argument_to_pyobject=argument_to_pyobject, **kwargs)
        result = ctypes.c_ushort(int(np.asarray(arg, dtype=np.float16).view(np.uint16)))
        if argument_to_pyobject is not None:  # as DaCe maps a scalar's ctypes value back to the object passed
            argument_to_pyobject[result.value] = (arg, argtype)
        return result

    dace.data.make_ctypes_argument = make_ctypes_argument
