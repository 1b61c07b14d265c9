/* Could a str hold a SPEC 8.5 wrapper? (its opening marker, found in one pass)
 *
 * Included by _fingerprint_c.pyx (the scalar writers' nonces mode, through
 * _fingerprint_scalars.pxi and _fingerprint_flat.h) and _percall_c.pyx (the
 * common result's text and details, hashed there without a call into the
 * fingerprint module): one definition, compiled into each.
 */
#ifndef LOOPCORE_WRAP_START_H
#define LOOPCORE_WRAP_START_H

#include <Python.h>
#include <string.h>

/* Does a ready str hold the opening marker of a SPEC 8.5 wrapper? One
   memchr pass for 1-byte storage (the common case), a plain loop else.
   Linear: each '<' costs at most one comparison of the marker. */
static const char LC_WRAP_START[] = "<<<EXTERNAL_UNTRUSTED_CONTENT";

static int lc_has_wrap_start(PyObject *s) {
    const Py_ssize_t m = (Py_ssize_t)sizeof(LC_WRAP_START) - 1;
    Py_ssize_t n = PyUnicode_GET_LENGTH(s), i, j;
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    if (n < m)
        return 0;
    if (kind == PyUnicode_1BYTE_KIND) {
        const unsigned char *p = (const unsigned char *)data;
        const unsigned char *last = p + (n - m);
        while (p <= last) {
            p = (const unsigned char *)memchr(p, '<', (size_t)(last - p) + 1);
            if (p == NULL)
                return 0;
            if (memcmp(p, LC_WRAP_START, (size_t)m) == 0)
                return 1;
            p++;
        }
        return 0;
    }
    for (i = 0; i + m <= n; i++) {
        if (PyUnicode_READ(kind, data, i) != '<')
            continue;
        for (j = 1; j < m; j++)
            if (PyUnicode_READ(kind, data, i + j) != (Py_UCS4)(unsigned char)LC_WRAP_START[j])
                break;
        if (j == m)
            return 1;
    }
    return 0;
}

#endif
