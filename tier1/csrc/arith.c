/* BINARY_OP's function (its OPERAND0) for the operators CPython 3.14 never
 * specialises for floats: `/` and `**`. A float with a float or a small int
 * is computed here as float_div and float_pow compute it (the same double
 * operation, the same result object); anything else, and every case that
 * raises or that float_pow sorts out before calling pow(), goes the
 * interpreter's way (PyNumber_TrueDivide, PyNumber_Power), which computes it
 * again. */
#include "../../stencils/c/ember_stencil.h"
#include "pycore_pymath.h"
#include <math.h>

/* An exact float's value, or a compact int's (below 2**30 in magnitude, so
 * exactly a double): what float_div and float_pow convert it to. */
static inline __attribute__((always_inline)) int
as_double(PyObject *o, double *out)
{
    if (PyFloat_CheckExact(o)) {
        *out = PyFloat_AS_DOUBLE(o);
        return 1;
    }
    if (PyLong_CheckExact(o) && _PyLong_IsCompact((PyLongObject *)o)) {
        *out = (double)_PyLong_CompactValue((PyLongObject *)o);
        return 1;
    }
    return 0;
}

/* `/`: float_div for a float and a float or small int, either side (an int
 * on the left: int's own division returns NotImplemented for a float). Two
 * ints are int's true division, which rounds differently: not here. */
static inline __attribute__((always_inline)) PyObject *
true_divide(PyObject *l, PyObject *r, binaryfunc other)
{
    double a, b;
    if ((PyFloat_CheckExact(l) || PyFloat_CheckExact(r)) && as_double(l, &a) && as_double(r, &b) && b != 0.0) {
        return PyFloat_FromDouble(a / b);
    }
    return other(l, r);
}

PyObject *
ember_true_divide(PyObject *l, PyObject *r)
{
    return true_divide(l, r, PyNumber_TrueDivide);
}

/* `/=`: floats have no in-place division; anything else may. */
PyObject *
ember_inplace_true_divide(PyObject *l, PyObject *r)
{
    return true_divide(l, r, PyNumber_InPlaceTrueDivide);
}

/* `**`: float_pow for a float base and a float or small int exponent, in
 * the case it leaves to the platform's pow(): a positive finite base other
 * than 1, a finite non-zero exponent, and pow() reporting no range error. */
static inline __attribute__((always_inline)) PyObject *
power(PyObject *l, PyObject *r, ternaryfunc other)
{
    double iv, iw;
    if (PyFloat_CheckExact(l) && as_double(r, &iw)) {
        iv = PyFloat_AS_DOUBLE(l);
        if (iv > 0.0 && iv != 1.0 && isfinite(iv) && isfinite(iw) && iw != 0.0) {
            errno = 0;
            double ix = pow(iv, iw);
            _Py_ADJUST_ERANGE1(ix);
            if (errno == 0) {
                return PyFloat_FromDouble(ix);
            }
        }
    }
    return other(l, r, Py_None);
}

PyObject *
ember_power(PyObject *l, PyObject *r)
{
    return power(l, r, PyNumber_Power);
}

/* `**=`: floats have no in-place power; anything else may. */
PyObject *
ember_inplace_power(PyObject *l, PyObject *r)
{
    return power(l, r, PyNumber_InPlacePower);
}
