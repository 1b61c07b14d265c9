/* How are the entries of a small dict read in one pass? (its entry table, not the dict API)
 *
 * Included by _percall_c.pyx (an args dict's memo, a result's fields and
 * details) and _fingerprint_c.pyx (a flat dict's snapshot). PyDict_Next costs
 * a call and some thirty instructions per entry, dict.get of a str key some
 * ninety; a small dict's entries are a few words each in one array. Where the
 * layout of that array is known (GIL builds of CPython 3.11 to 3.13, whose
 * dict keys object is the one below), a combined table is read directly: its
 * entries in the order PyDict_Next gives them (the table's, deleted entries
 * skipped), a str key found by comparing it with each entry's. Split tables
 * (instance dicts), other versions and free-threaded builds take the API.
 *
 * lc_dict_entries_verify, run once when a module is imported, compares both
 * ways on dicts of each kind, with a deleted entry; the table is read only
 * when they agree. Nothing here runs Python code or takes a reference.
 * tests/test_dict_entries.py compares the hashes on dicts of every shape.
 */
#ifndef LOOPCORE_DICT_ENTRIES_H
#define LOOPCORE_DICT_ENTRIES_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#if !defined(Py_GIL_DISABLED) && PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000
#define LC_DICT_TABLE 1
/* CPython's struct _dictkeysobject (Include/internal/pycore_dict.h) on these
   versions and builds, field for field. */
typedef struct {
    Py_ssize_t dk_refcnt;
    uint8_t dk_log2_size;
    uint8_t dk_log2_index_bytes;
    uint8_t dk_kind;
    uint32_t dk_version;
    Py_ssize_t dk_usable;
    Py_ssize_t dk_nentries;
    char dk_indices[];
} lc_dict_keys;

/* An entry of a table whose keys are all str (dk_kind != 0), and of any other. */
typedef struct {
    PyObject *key;
    PyObject *value;
} lc_str_entry;

typedef struct {
    Py_hash_t hash;
    PyObject *key;
    PyObject *value;
} lc_any_entry;

#define LC_DICT_KEYS_GENERAL 0
/* Entries (deleted ones included) scanned by lc_dict_find_str at most. */
#define LC_DICT_FIND_MAX 8

/* Set by lc_dict_entries_verify when the table reads as PyDict_Next does. */
static int lc_dict_table_ok = 0;
#endif

/* Borrowed references to dict d's (key, value) pairs, in PyDict_Next's order,
   into out (room for 2 * cap pointers): their number, or -1 when d holds more
   than cap pairs. Runs no Python code; the caller decides whether d can
   change meanwhile (another thread of a free-threaded build), as with
   PyDict_Next, which it takes there. */
static inline Py_ssize_t lc_dict_entries(PyObject *d, PyObject **out, Py_ssize_t cap)
{
    Py_ssize_t i = 0, pos = 0;
    PyObject *k, *v;
    if (PyDict_GET_SIZE(d) > cap)
        return -1;
#ifdef LC_DICT_TABLE
    if (lc_dict_table_ok && ((PyDictObject *)d)->ma_values == NULL) {
        const lc_dict_keys *keys = (const lc_dict_keys *)(void *)((PyDictObject *)d)->ma_keys;
        const char *table = keys->dk_indices + ((size_t)1 << keys->dk_log2_index_bytes);
        Py_ssize_t e, n = keys->dk_nentries;
        if (keys->dk_kind != LC_DICT_KEYS_GENERAL) {
            const lc_str_entry *entry = (const lc_str_entry *)(const void *)table;
            for (e = 0; e < n; e++) {
                if (entry[e].value == NULL)
                    continue; /* deleted */
                if (i >= cap)
                    return -1;
                out[2 * i] = entry[e].key;
                out[2 * i + 1] = entry[e].value;
                i++;
            }
        } else {
            const lc_any_entry *entry = (const lc_any_entry *)(const void *)table;
            for (e = 0; e < n; e++) {
                if (entry[e].value == NULL)
                    continue;
                if (i >= cap)
                    return -1;
                out[2 * i] = entry[e].key;
                out[2 * i + 1] = entry[e].value;
                i++;
            }
        }
        return i;
    }
#endif
    while (PyDict_Next(d, &pos, &k, &v)) {
        if (i >= cap)
            return -1;
        out[2 * i] = k;
        out[2 * i + 1] = v;
        i++;
    }
    return i;
}

/* Where the value of str key ``key`` (a compact ASCII str whose hash is
   cached, as an interned one's is) is found in dict d without dict.get: 1
   (*found borrowed), 0 (no such key), or -1 when dict.get must answer (a
   table not read here, a large dict, a key it would compare the slow way). A table of str keys holds exact strs only (CPython
   moves any other key to a general table), so an entry equals ``key`` when its
   text does; no Python code runs. */
#if defined(__GNUC__)
__attribute__((always_inline)) /* a few compares, at each of its callers */
#endif
static inline int lc_dict_find_str(PyObject *d, PyObject *key, PyObject **found)
{
#ifdef LC_DICT_TABLE
    const lc_dict_keys *keys;
    const lc_str_entry *entry;
    /* The key's text is read only for an entry of the same hash that is another
       object (rare: interned keys match by address): PyUnicode_DATA is a call
       where it is not inlined, made for nothing on the common path. */
    Py_ssize_t e, n, len = PyUnicode_GET_LENGTH(key);
    Py_hash_t hash = ((PyASCIIObject *)key)->hash;
    if (!lc_dict_table_ok || ((PyDictObject *)d)->ma_values != NULL || hash == -1)
        return -1;
    keys = (const lc_dict_keys *)(void *)((PyDictObject *)d)->ma_keys;
    n = keys->dk_nentries;
    if (keys->dk_kind == LC_DICT_KEYS_GENERAL || n > LC_DICT_FIND_MAX)
        return -1;
    entry = (const lc_str_entry *)(const void *)(keys->dk_indices
                                                 + ((size_t)1 << keys->dk_log2_index_bytes));
    for (e = 0; e < n; e++) {
        PyObject *k = entry[e].key;
        if (entry[e].value == NULL)
            continue; /* deleted */
        if (k == key) {
            *found = entry[e].value;
            return 1;
        }
        if (!PyUnicode_IS_COMPACT(k))
            return -1;
        /* A key in a dict has its hash cached: another hash is other text. A
           compact str that is not ASCII never equals an ASCII one. */
        if (((PyASCIIObject *)k)->hash != hash)
            continue;
        if (PyUnicode_IS_ASCII(k) && PyUnicode_GET_LENGTH(k) == len
            && memcmp(PyUnicode_DATA(k), PyUnicode_DATA(key), (size_t)len) == 0) {
            *found = entry[e].value;
            return 1;
        }
    }
    return 0;
#else
    (void)d; (void)key; (void)found;
    return -1;
#endif
}

#ifdef LC_DICT_TABLE
/* Does the table of d read exactly as PyDict_Next walks d? */
static int lc_dict_table_agrees(PyObject *d)
{
    PyObject *seen[16], *k, *v;
    Py_ssize_t n, i = 0, pos = 0;
    const lc_dict_keys *keys = (const lc_dict_keys *)(void *)((PyDictObject *)d)->ma_keys;
    /* Three entries inserted (one deleted since) in the smallest table, whose
       indices are one byte each: anything else is not the layout above. */
    if (((PyDictObject *)d)->ma_values != NULL || keys->dk_refcnt < 1 || keys->dk_log2_size != 3
        || keys->dk_log2_index_bytes != 3 || keys->dk_nentries != 3)
        return 0;
    lc_dict_table_ok = 1;
    n = lc_dict_entries(d, seen, 8);
    lc_dict_table_ok = 0;
    if (n != PyDict_GET_SIZE(d))
        return 0;
    while (PyDict_Next(d, &pos, &k, &v)) {
        if (i >= n || seen[2 * i] != k || seen[2 * i + 1] != v)
            return 0;
        i++;
    }
    return i == n;
}
#endif

/* Compare both ways on a dict of str keys and one of int keys, each with an
   entry deleted, and read tables from then on if they agree. -1 with an
   exception set when building the test dicts failed. */
static int lc_dict_entries_verify(void)
{
#ifdef LC_DICT_TABLE
    int ok = 0;
    PyObject *str_keys = Py_BuildValue("{sisisi}", "a", 1, "b", 2, "c", 3);
    PyObject *int_keys = Py_BuildValue("{isisis}", 1, "a", 2, "b", 3, "c");
    PyObject *gone = PyLong_FromLong(2);
    if (str_keys == NULL || int_keys == NULL || gone == NULL)
        goto done;
    if (PyDict_DelItemString(str_keys, "b") < 0 || PyDict_DelItem(int_keys, gone) < 0)
        goto done;
    ok = lc_dict_table_agrees(str_keys) && lc_dict_table_agrees(int_keys);
    lc_dict_table_ok = ok;
    ok = 1;
done:
    Py_XDECREF(str_keys);
    Py_XDECREF(int_keys);
    Py_XDECREF(gone);
    return ok ? 0 : -1;
#else
    return 0;
#endif
}

#endif
