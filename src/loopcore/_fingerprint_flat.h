/* What are the bytes of a small flat dict of ASCII keys and plain scalars, in one pass?
 *
 * Included by _fingerprint_c.pyx (through _fingerprint_order.pxi) and by
 * _percall_c.pyx (a memo's args and a common result's details, written there
 * without a call into the fingerprint module; its own kept key sets). A typical
 * tool call's args and a result's details are such dicts: a few compact-ASCII
 * str keys mapped to short ASCII strs, one-digit ints, floats, None or bools.
 * lc_flat_dict checks every entry, orders the keys and writes the whole
 * encoding (SPEC 2: 'd', the count, then key and value of each entry in byte
 * order) with one room check, where the general writer checks the kind of
 * each value twice and the room before each piece; keys whose order it kept
 * are written with each value in a single pass.
 *
 * It writes only what the general writer would, byte for byte, and declines
 * (returns 0; whatever it put in the output is not output) what it does not
 * cover: other keys, non-ASCII or long str values, ints wider than one digit,
 * integral floats beyond int64, and in nonces mode a str that may hold a
 * wrapper (the reference normalises those). The caller then takes the general writer. Nothing here runs Python
 * code: the items are borrowed references the caller keeps alive. The interned
 * key sets met last are kept with their order (lc_flat_shape_keep), so the
 * same keys again are neither checked nor sorted again.
 */
#ifndef LOOPCORE_FINGERPRINT_FLAT_H
#define LOOPCORE_FINGERPRINT_FLAT_H

#include <math.h>
#include <string.h>

#include "_wrap_start.h"

/* Entries covered (the general writer's insertion-sort bound). */
#define LC_FLAT_MAX 16
/* Longest str value covered: far below the streaming threshold. */
#define LC_FLAT_STR_MAX 4096

/* The text of a compact ASCII str (checked before): right after its header,
   without PyUnicode_DATA's tests of the str's kind and layout. */
#define LC_FLAT_ASCII_DATA(s) ((const void *)(((PyASCIIObject *)(s)) + 1))


static inline void lc_flat_u64(unsigned char *p, uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &v, 8);
#else
    int i;
    for (i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
#endif
}

/* memcpy of a short key or value (most are under 16 bytes) without a libc
   call: two overlapping moves. */
static inline void lc_flat_copy(unsigned char *dst, const void *src, size_t n)
{
    const unsigned char *p = (const unsigned char *)src;
    uint64_t a, b;
    uint32_t c, d;
    if (n > 16) {
        memcpy(dst, p, n);
    } else if (n >= 8) {
        memcpy(&a, p, 8);
        memcpy(&b, p + n - 8, 8);
        memcpy(dst, &a, 8);
        memcpy(dst + n - 8, &b, 8);
    } else if (n >= 4) {
        memcpy(&c, p, 4);
        memcpy(&d, p + n - 4, 4);
        memcpy(dst, &c, 4);
        memcpy(dst + n - 4, &d, 4);
    } else {
        while (n--)
            *dst++ = *p++;
    }
}

/* Do compact-ASCII keys a and b encode in this order? ('s', the 8-byte
   little-endian length, the bytes: the length's low byte first, then the text.) */
static inline int lc_flat_before(PyObject *a, PyObject *b)
{
    size_t la = (size_t)PyUnicode_GET_LENGTH(a), lb = (size_t)PyUnicode_GET_LENGTH(b);
    if (la != lb) {
        while ((la & 0xFF) == (lb & 0xFF)) {
            la >>= 8;
            lb >>= 8;
        }
        return (la & 0xFF) < (lb & 0xFF);
    }
    return memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), la) < 0;
}

/* The length of a str the writer covers (compact ASCII, at most LC_FLAT_STR_MAX
   characters, and in nonces mode no wrapper's opening marker), or -1.
   min_wrapped < 0: no nonces mode, str values are written as they are. */
static inline Py_ssize_t lc_flat_str_len(PyObject *v, Py_ssize_t min_wrapped)
{
    Py_ssize_t n;
    if (!PyUnicode_IS_COMPACT_ASCII(v))
        return -1;
    n = PyUnicode_GET_LENGTH(v);
    if (n > LC_FLAT_STR_MAX)
        return -1;
    if (min_wrapped >= 0 && n >= min_wrapped && lc_has_wrap_start(v))
        return -1;
    return n;
}

/* Is an exact int one the writer covers (one digit at most, or 3.12's compact
   form)? */
static inline int lc_flat_int_covered(PyObject *v)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyUnstable_Long_IsCompact((PyLongObject *)v);
#else
    return Py_SIZE(v) >= -1 && Py_SIZE(v) <= 1;
#endif
}

/* The value of an int lc_flat_int_covered said the writer covers. */
static inline long long lc_flat_int_value(PyObject *v)
{
#if PY_VERSION_HEX >= 0x030C0000
    return (long long)PyUnstable_Long_CompactValue((PyLongObject *)v);
#else
    return Py_SIZE(v) ? (long long)Py_SIZE(v) * (long long)((PyLongObject *)v)->ob_digit[0] : 0;
#endif
}

/* The bytes one covered value takes (its tag included), or 0 when not covered. */
static inline Py_ssize_t lc_flat_value_size(PyObject *v, Py_ssize_t min_wrapped)
{
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyUnicode_Type) {
        Py_ssize_t n = lc_flat_str_len(v, min_wrapped);
        return n < 0 ? 0 : 9 + n;
    }
    if (t == &PyLong_Type)
        return lc_flat_int_covered(v) ? 9 : 0;
    if (t == &PyFloat_Type) {
        double x = PyFloat_AS_DOUBLE(v);
        if (x != x || x == INFINITY || x == -INFINITY)
            return 1;
        if (x == floor(x) && !(-9223372036854775808.0 <= x && x < 9223372036854775808.0))
            return 0; /* an int beyond int64: the reference's own writer */
        return 9;
    }
    if (v == Py_None || v == Py_True || v == Py_False)
        return 1;
    return 0;
}

/* Write one covered value (lc_flat_value_size said it fits); the bytes written. */
static inline Py_ssize_t lc_flat_value_put(PyObject *v, unsigned char *out)
{
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyUnicode_Type) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(v);
        out[0] = 's';
        lc_flat_u64(out + 1, (uint64_t)n);
        lc_flat_copy(out + 9, PyUnicode_DATA(v), (size_t)n);
        return 9 + n;
    }
    if (t == &PyLong_Type) {
        long long x = lc_flat_int_value(v);
        out[0] = 'i';
        lc_flat_u64(out + 1, (uint64_t)(int64_t)x);
        return 9;
    }
    if (t == &PyFloat_Type) {
        double x = PyFloat_AS_DOUBLE(v);
        uint64_t bits;
        if (x != x) {
            out[0] = 'n';
            return 1;
        }
        if (x == INFINITY || x == -INFINITY) {
            out[0] = x > 0 ? '+' : '-';
            return 1;
        }
        if (x == floor(x)) { /* an integral float encodes as the int it equals */
            out[0] = 'i';
            lc_flat_u64(out + 1, (uint64_t)(int64_t)x);
            return 9;
        }
        memcpy(&bits, &x, 8);
        out[0] = 'f';
        lc_flat_u64(out + 1, bits);
        return 9;
    }
    out[0] = v == Py_None ? 'N' : v == Py_True ? 'T' : 'F';
    return 1;
}

/* lc_flat_value_size and lc_flat_value_put in one dispatch: the bytes written
   (at most avail), 0 when v is not covered, -1 when avail is too small. */
static inline Py_ssize_t lc_flat_value_write(PyObject *v, Py_ssize_t min_wrapped,
                                             unsigned char *out, Py_ssize_t avail)
{
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyUnicode_Type) {
        Py_ssize_t n = lc_flat_str_len(v, min_wrapped);
        if (n < 0)
            return 0;
        if (avail < 9 + n)
            return -1;
        out[0] = 's';
        lc_flat_u64(out + 1, (uint64_t)n);
        lc_flat_copy(out + 9, LC_FLAT_ASCII_DATA(v), (size_t)n);
        return 9 + n;
    }
    if (t == &PyLong_Type) {
        long long x;
        if (!lc_flat_int_covered(v))
            return 0;
        x = lc_flat_int_value(v);
        if (avail < 9)
            return -1;
        out[0] = 'i';
        lc_flat_u64(out + 1, (uint64_t)(int64_t)x);
        return 9;
    }
    if (t == &PyFloat_Type || v == Py_None || v == Py_True || v == Py_False) {
        Py_ssize_t size = lc_flat_value_size(v, min_wrapped);
        if (size == 0)
            return 0;
        if (avail < size)
            return -1;
        return lc_flat_value_put(v, out);
    }
    return 0;
}

/* The key sets met last (GIL builds): a dict built by the same code, call after
   call, holds the same key objects in the same order, checked and sorted the
   first time. Each kept set holds references to its keys, so a key matched by
   address is the very object checked then (a str never changes). Two are kept:
   a call's args and a result's details take turns. */
#define LC_FLAT_SHAPES 2

typedef struct {
    Py_ssize_t n;
    PyObject *keys[LC_FLAT_MAX];
    int order[LC_FLAT_MAX];
} lc_flat_shape;

#ifndef Py_GIL_DISABLED
static lc_flat_shape lc_flat_shapes[LC_FLAT_SHAPES];
static int lc_flat_next_shape;
#endif

/* The order kept for these keys, or NULL. */
static inline const int *lc_flat_shape_find(PyObject *const *items, Py_ssize_t n)
{
#ifdef Py_GIL_DISABLED
    (void)items; (void)n;
    return NULL; /* another thread may replace a kept set meanwhile */
#else
    int s;
    Py_ssize_t i;
    for (s = 0; s < LC_FLAT_SHAPES; s++) {
        const lc_flat_shape *shape = &lc_flat_shapes[s];
        if (shape->n != n)
            continue;
        for (i = 0; i < n; i++)
            if (shape->keys[i] != items[2 * i])
                break;
        if (i == n)
            return shape->order;
    }
    return NULL;
#endif
}

/* Are all the keys interned? Keys written in code are (the same objects come
   again); keys decoded from JSON are not, and are new objects in each dict:
   keeping those would only replace one kept set by another at every call. */
static inline int lc_flat_interned(PyObject *const *items, Py_ssize_t n)
{
    Py_ssize_t i;
    for (i = 0; i < n; i++)
        if (!PyUnicode_CHECK_INTERNED(items[2 * i]))
            return 0;
    return 1;
}

/* Keep checked keys and their order, in place of the set kept longest. */
static void lc_flat_shape_keep(PyObject *const *items, Py_ssize_t n, const int *order)
{
#ifndef Py_GIL_DISABLED
    lc_flat_shape *shape = &lc_flat_shapes[lc_flat_next_shape];
    PyObject *old[LC_FLAT_MAX];
    Py_ssize_t i, old_n = shape->n;
    lc_flat_next_shape = (lc_flat_next_shape + 1) % LC_FLAT_SHAPES;
    for (i = 0; i < old_n; i++)
        old[i] = shape->keys[i];
    for (i = 0; i < n; i++) {
        Py_INCREF(items[2 * i]);
        shape->keys[i] = items[2 * i];
        shape->order[i] = order[i];
    }
    shape->n = n;
    /* Released once the new set is whole: exact strs, no finaliser runs. */
    for (i = 0; i < old_n; i++)
        Py_DECREF(old[i]);
#else
    (void)items; (void)n; (void)order;
#endif
}

/* The encoding of the dict given as its n (key, value) pairs, into out (room
   bytes free): the bytes written; 0 when an entry is not covered (nothing
   written); -(bytes needed) when they are more than room (nothing written). */
static Py_ssize_t lc_flat_dict(PyObject *const *items, Py_ssize_t n, Py_ssize_t min_wrapped,
                               unsigned char *out, Py_ssize_t room)
{
    int sorted[LC_FLAT_MAX];
    const int *order;
    Py_ssize_t i, j, need = 9, size, at;
    if (n > LC_FLAT_MAX)
        return 0;
    order = n > 0 ? lc_flat_shape_find(items, n) : NULL;
    if (order != NULL && room >= 9) {
        /* Keys checked and ordered before: one pass checks and writes each
           value (what is written before a value is declined is no output). */
        for (at = 9, i = 0; i < n; i++) {
            PyObject *key = items[2 * order[i]];
            Py_ssize_t len = PyUnicode_GET_LENGTH(key);
            if (room - at < 9 + len)
                break;
            out[at] = 's';
            lc_flat_u64(out + at + 1, (uint64_t)len);
            lc_flat_copy(out + at + 9, LC_FLAT_ASCII_DATA(key), (size_t)len);
            at += 9 + len;
            size = lc_flat_value_write(items[2 * order[i] + 1], min_wrapped, out + at, room - at);
            if (size == 0)
                return 0;
            if (size < 0)
                break;
            at += size;
        }
        if (i == n) {
            out[0] = 'd';
            lc_flat_u64(out + 1, (uint64_t)n);
            return at;
        }
        /* Out of room: the size it takes, as below. */
    }
    if (order != NULL) {
        for (i = 0; i < n; i++) {
            size = lc_flat_value_size(items[2 * i + 1], min_wrapped);
            if (size == 0)
                return 0;
            need += 9 + PyUnicode_GET_LENGTH(items[2 * i]) + size;
        }
    } else {
        for (i = 0; i < n; i++) {
            PyObject *key = items[2 * i];
            if (!PyUnicode_CheckExact(key) || !PyUnicode_IS_COMPACT_ASCII(key))
                return 0;
            size = lc_flat_value_size(items[2 * i + 1], min_wrapped);
            if (size == 0)
                return 0;
            need += 9 + PyUnicode_GET_LENGTH(key) + size;
            /* Distinct keys encode distinctly: ordering the keys orders the entries. */
            j = i;
            while (j > 0 && lc_flat_before(key, items[2 * sorted[j - 1]])) {
                sorted[j] = sorted[j - 1];
                j--;
            }
            sorted[j] = (int)i;
        }
        if (n > 0 && lc_flat_interned(items, n))
            lc_flat_shape_keep(items, n, sorted);
        order = sorted;
    }
    if (need > room)
        return -need;
    out[0] = 'd';
    lc_flat_u64(out + 1, (uint64_t)n);
    at = 9;
    for (i = 0; i < n; i++) {
        PyObject *key = items[2 * order[i]];
        Py_ssize_t len = PyUnicode_GET_LENGTH(key);
        out[at] = 's';
        lc_flat_u64(out + at + 1, (uint64_t)len);
        lc_flat_copy(out + at + 9, PyUnicode_DATA(key), (size_t)len);
        at += 9 + len;
        at += lc_flat_value_put(items[2 * order[i] + 1], out + at);
    }
    return at;
}

#endif
