/* Is a result the common one: one text entry and flat details, read without Python code?
 *
 * Included by _outcome_plain.pxi (the outcome rules' fast path, compiled into
 * _outcome_c and _percall_c). Most tool results are {"content": [{"type":
 * "text", "text": ...}], "details": {...}}: lc_common_result reads such a
 * result from its dicts' entry tables (_dict_entries.h) with borrowed
 * references, checks what the generic rule of SPEC section 2 checks, and hands
 * back the details' entries and the text to hash. Anything else (several
 * entries, a status to decide on, a text to strip, a dict read only through
 * its API) answers 0, and the general path of _outcome_plain.pxi reads the
 * result from the start: nothing here has run Python code or changed anything.
 */
#ifndef LOOPCORE_OUTCOME_COMMON_H
#define LOOPCORE_OUTCOME_COMMON_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_dict_entries.h"

/* A dict's version tag (PEP 509): every change to a dict gives it a new
   value, unique among all dicts, so an unchanged tag means unchanged
   entries. Read where CPython still bumps it on every change (3.11 to
   3.13, GIL builds); 0 elsewhere, where the entries are compared. */
#if PY_VERSION_HEX < 0x030E0000 && !defined(Py_GIL_DISABLED)
#define LOOPCORE_DICT_VERSIONS 1
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
static inline uint64_t loopcore_dict_version(PyObject *d) {
    return ((PyDictObject *)d)->ma_version_tag;
}
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#else
#define LOOPCORE_DICT_VERSIONS 0
static inline uint64_t loopcore_dict_version(PyObject *d) {
    (void)d;
    return 0;
}
#endif
/* The entries of a dict of at most ``cap`` entries whose keys are all
   exact str, borrowed into ``out`` (key, value, key, value, ...): their
   number, with the index of the entry whose key is "status" in ``*status``
   (-1: none). -1 for any other dict, and without version tags: dict.get
   answers then. Runs no Python code. */
#if defined(__GNUC__)
__attribute__((always_inline)) /* a few compares per entry, at each of its two callers */
#endif
static inline Py_ssize_t lc_details_items(PyObject *d, PyObject **out, Py_ssize_t cap,
                                   PyObject *status_key, Py_ssize_t *status) {
    *status = -1;
#if LOOPCORE_DICT_VERSIONS
    Py_ssize_t i, n = lc_dict_entries(d, out, cap);
    for (i = 0; i < n; i++) {
        PyObject *k = out[2 * i];
        if (!PyUnicode_CheckExact(k))
            return -1;
        if (k == status_key) {
            *status = i;
        } else if (PyUnicode_IS_COMPACT_ASCII(k)) {
            if (PyUnicode_GET_LENGTH(k) == 6 && memcmp(PyUnicode_DATA(k), "status", 6) == 0)
                *status = i;
        } else if (!PyUnicode_IS_COMPACT(k)) {
            return -1; /* a legacy str: dict.get compares it */
        }
        /* (A compact str that is not ASCII never equals "status".) */
    }
    return n;
#else
    (void)d; (void)out; (void)cap; (void)status_key;
    return -1;
#endif
}

/* The keys a result is read by (interned strs), in this order. */
enum { LC_KEY_CONTENT, LC_KEY_DETAILS, LC_KEY_TYPE, LC_KEY_TEXT, LC_KEY_STATUS, LC_KEYS };

/* Is the compact ASCII str s exactly the text lit of length n? */
static inline int lc_ascii_equals(PyObject *s, const char *lit, Py_ssize_t n)
{
    return PyUnicode_IS_COMPACT_ASCII(s) && PyUnicode_GET_LENGTH(s) == n
        && memcmp(PyUnicode_DATA(s), lit, (size_t)n) == 0;
}

/* 1 when the exact dict result is the common generic result, with borrowed
   references: *details (NULL: none, hashed as {}), its *n_items entries in
   items (room for 2 * cap) and the *text to hash (an exact str with no space
   at either end, as the rule's strip() would leave it). 0 otherwise. */
static int lc_common_result(PyObject *result, PyObject *const *keys, PyObject **details,
                            PyObject **items, Py_ssize_t cap, Py_ssize_t *n_items,
                            PyObject **text)
{
    PyObject *content, *entry, *kind;
    Py_ssize_t n, at_status;
    if (lc_dict_find_str(result, keys[LC_KEY_CONTENT], &content) != 1)
        return 0;
    switch (lc_dict_find_str(result, keys[LC_KEY_DETAILS], details)) {
    case 0:
        *details = NULL;
        *n_items = 0;
        break;
    case 1:
        if (!PyDict_CheckExact(*details))
            return 0;
        n = lc_details_items(*details, items, cap, keys[LC_KEY_STATUS], &at_status);
        if (n < 0)
            return 0;
        if (at_status >= 0) {
            /* A status lets the result through when None or a str but
               "blocked"; the general path decides on any other. */
            PyObject *status = items[2 * at_status + 1];
            if (status != Py_None
                && (!PyUnicode_CheckExact(status) || !PyUnicode_IS_COMPACT(status)
                    || lc_ascii_equals(status, "blocked", 7)))
                return 0;
        }
        *n_items = n;
        break;
    default:
        return 0;
    }
    if (!PyList_CheckExact(content) || PyList_GET_SIZE(content) != 1)
        return 0;
    entry = PyList_GET_ITEM(content, 0);
    if (!PyDict_CheckExact(entry))
        return 0;
    if (lc_dict_find_str(entry, keys[LC_KEY_TYPE], &kind) != 1 || !PyUnicode_Check(kind))
        return 0;
    if (lc_dict_find_str(entry, keys[LC_KEY_TEXT], text) != 1 || !PyUnicode_CheckExact(*text)
        || !PyUnicode_IS_COMPACT(*text))
        return 0;
    n = PyUnicode_GET_LENGTH(*text);
    if (n > 0) {
        /* Read in place (PyUnicode_READ_CHAR is a call where it is not inlined). */
        int width = PyUnicode_KIND(*text);
        /* A compact str's text follows its header (checked compact above):
           PyUnicode_DATA's test for the legacy layout is a call where not inlined. */
        const void *data = PyUnicode_IS_ASCII(*text)
            ? (const void *)(((PyASCIIObject *)*text) + 1)
            : (const void *)(((PyCompactUnicodeObject *)*text) + 1);
        if (Py_UNICODE_ISSPACE(PyUnicode_READ(width, data, 0))
            || Py_UNICODE_ISSPACE(PyUnicode_READ(width, data, n - 1)))
            return 0;
    }
    return 1;
}

#endif
