/* What stays the same across the runs of a failing command? (SPEC §8.4 shape(), in C)
 *
 * The five drift patterns of _exec_shape._DRIFT, each applied to the whole text
 * in order, every leftmost non-overlapping match replaced by '#', exactly as
 * Python's re.sub does with re.ASCII (and IGNORECASE where the spec says so):
 * \d is 0-9, \s is [\t\n\v\f\r ], \w is [A-Za-z0-9_], case folding is ASCII only.
 * Each matcher reads a bounded window past its start (a run of digits or of
 * separators at most once more), so a pass is linear in the text. Every match
 * is at least two characters long and becomes one, so a pass never grows the
 * text: each writes into a buffer as long as its input.
 *
 * The matchers work on code points (Py_UCS4) and need no Python object, so
 * they never raise; the caller converts the str once and builds one str back.
 */
#ifndef LOOPCORE_OUTCOME_SHAPE_H
#define LOOPCORE_OUTCOME_SHAPE_H

#include <Python.h>
#include <string.h>

typedef Py_UCS4 lc_ch;

static inline int lc_digit(lc_ch c) { return c >= '0' && c <= '9'; }
static inline int lc_word(lc_ch c) {
    return lc_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static inline int lc_space(lc_ch c) { return c == ' ' || (c >= 9 && c <= 13); }
static inline lc_ch lc_lower(lc_ch c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

/* Does s[at:] start with the lower-case ASCII word w, case-insensitively? */
static int lc_word_at(const lc_ch *s, Py_ssize_t n, Py_ssize_t at, const char *w) {
    for (; *w; w++, at++) {
        if (at >= n || lc_lower(s[at]) != (lc_ch)(unsigned char)*w) return 0;
    }
    return 1;
}

/* \b before a word character at ``at`` (which the caller has checked). */
static inline int lc_starts_word(const lc_ch *s, Py_ssize_t at) {
    return at == 0 || !lc_word(s[at - 1]);
}

/* \b after a word character ending at ``at``. */
static inline int lc_ends_word(const lc_ch *s, Py_ssize_t n, Py_ssize_t at) {
    return at >= n || !lc_word(s[at]);
}

/* ``count`` digits at ``at``? */
static inline int lc_digits(const lc_ch *s, Py_ssize_t n, Py_ssize_t at, int count) {
    if (at + count > n) return 0;
    for (int i = 0; i < count; i++) {
        if (!lc_digit(s[at + i])) return 0;
    }
    return 1;
}

/* (?:\.\d{1,6})? at ``at``: where it ends (``at`` itself when absent). */
static Py_ssize_t lc_fraction(const lc_ch *s, Py_ssize_t n, Py_ssize_t at) {
    if (at + 1 < n && s[at] == '.' && lc_digit(s[at + 1])) {
        Py_ssize_t j = at + 1;
        while (j < n && j - at <= 6 && lc_digit(s[j])) j++;
        return j;
    }
    return at;
}

/* (1) I \d{4}-\d{2}-\d{2}[t ]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:z|[+-]\d{2}:\d{2})? */
static Py_ssize_t lc_match_datetime(const lc_ch *s, Py_ssize_t n, Py_ssize_t i) {
    if (i + 19 > n || !lc_digits(s, n, i, 4) || s[i + 4] != '-' || !lc_digits(s, n, i + 5, 2)
        || s[i + 7] != '-' || !lc_digits(s, n, i + 8, 2)) return -1;
    lc_ch t = s[i + 10];
    if (t != 't' && t != 'T' && t != ' ') return -1;
    if (!lc_digits(s, n, i + 11, 2) || s[i + 13] != ':' || !lc_digits(s, n, i + 14, 2)
        || s[i + 16] != ':' || !lc_digits(s, n, i + 17, 2)) return -1;
    Py_ssize_t j = lc_fraction(s, n, i + 19);
    if (j < n && (s[j] == 'z' || s[j] == 'Z')) return j + 1;
    if (j + 6 <= n && (s[j] == '+' || s[j] == '-') && lc_digits(s, n, j + 1, 2)
        && s[j + 3] == ':' && lc_digits(s, n, j + 4, 2)) return j + 6;
    return j;
}

/* (2) \d{1,2}:\d{2}:\d{2}(?:\.\d{1,6})? */
static Py_ssize_t lc_match_clock(const lc_ch *s, Py_ssize_t n, Py_ssize_t i) {
    if (!lc_digit(s[i])) return -1;
    /* Two leading digits first (greedy); one only when the second is the colon. */
    Py_ssize_t j = (i + 1 < n && lc_digit(s[i + 1])) ? i + 2 : i + 1;
    if (j + 6 > n || s[j] != ':' || !lc_digits(s, n, j + 1, 2) || s[j + 3] != ':'
        || !lc_digits(s, n, j + 4, 2)) return -1;
    return lc_fraction(s, n, j + 6);
}

/* [\s#:=]*\d+ at ``at``: its end, or -1. The run holds no digit, so no backtracking helps. */
static Py_ssize_t lc_counter(const lc_ch *s, Py_ssize_t n, Py_ssize_t at) {
    while (at < n && (lc_space(s[at]) || s[at] == '#' || s[at] == ':' || s[at] == '=')) at++;
    if (at >= n || !lc_digit(s[at])) return -1;
    while (at < n && lc_digit(s[at])) at++;
    return at;
}

/* I \b(?:w0|w1|...)\b[\s#:=]*\d+ at ``i``: its end, or -1. The alternatives are
   tried in order, each to the end of the pattern, as the regex backtracks. */
static Py_ssize_t lc_match_keyword(const lc_ch *s, Py_ssize_t n, Py_ssize_t i,
                                   const char *const *words) {
    lc_ch c = lc_lower(s[i]);
    for (; *words; words++) {
        const char *w = *words;
        Py_ssize_t j, end;
        if (c != (lc_ch)(unsigned char)w[0] || !lc_starts_word(s, i) || !lc_word_at(s, n, i, w))
            continue;
        j = i + (Py_ssize_t)strlen(w);
        if (!lc_ends_word(s, n, j)) continue;
        end = lc_counter(s, n, j);
        if (end >= 0) return end;
    }
    return -1;
}

/* (3) I \b(?:attempt|retry)\b[\s#:=]*\d+ */
static Py_ssize_t lc_match_attempt(const lc_ch *s, Py_ssize_t n, Py_ssize_t i) {
    static const char *const words[] = {"attempt", "retry", NULL};
    return lc_match_keyword(s, n, i, words);
}

/* (5) I \b(?:pid|ppid)\b[\s#:=]*\d+ */
static Py_ssize_t lc_match_pid(const lc_ch *s, Py_ssize_t n, Py_ssize_t i) {
    static const char *const words[] = {"pid", "ppid", NULL};
    return lc_match_keyword(s, n, i, words);
}

/* (?:ns|us|ms|seconds?|minutes?|hours?|s)\b at ``at``, alternatives in order. */
static Py_ssize_t lc_unit(const lc_ch *s, Py_ssize_t n, Py_ssize_t at) {
    static const char *const units[] = {
        "ns", "us", "ms", "seconds", "second", "minutes", "minute", "hours", "hour", "s", NULL,
    };
    for (int k = 0; units[k]; k++) {
        if (lc_word_at(s, n, at, units[k])) {
            Py_ssize_t end = at + (Py_ssize_t)strlen(units[k]);
            if (lc_ends_word(s, n, end)) return end;
        }
    }
    return -1;
}

/* \s?UNIT\b at ``at``: the optional space taken first, as the greedy ``?`` does. */
static Py_ssize_t lc_spaced_unit(const lc_ch *s, Py_ssize_t n, Py_ssize_t at) {
    if (at < n && lc_space(s[at])) {
        Py_ssize_t end = lc_unit(s, n, at + 1);
        if (end >= 0) return end;
    }
    return lc_unit(s, n, at);
}

/* (4) I \b\d+(?:\.\d+)?\s?(?:ns|us|ms|seconds?|minutes?|hours?|s)\b
 * Giving back digits of either run leaves a digit next, which neither \s nor a
 * unit matches: only the fraction's presence and the space's are alternatives. */
static Py_ssize_t lc_match_duration(const lc_ch *s, Py_ssize_t n, Py_ssize_t i) {
    if (!lc_digit(s[i]) || !lc_starts_word(s, i)) return -1;
    Py_ssize_t j = i;
    while (j < n && lc_digit(s[j])) j++;
    if (j + 1 < n && s[j] == '.' && lc_digit(s[j + 1])) {
        Py_ssize_t k = j + 1;
        while (k < n && lc_digit(s[k])) k++;
        Py_ssize_t end = lc_spaced_unit(s, n, k);
        if (end >= 0) return end;
    }
    return lc_spaced_unit(s, n, j);
}

/* One re.sub(pattern, "#", s) into ``out`` (capacity n), its new length. FIRST is
 * the pattern's possible first characters, tested inline so that the matcher
 * runs only where a match can start. */
#define LC_SUB(NAME, FIRST, MATCH)                                                  \
    static Py_ssize_t NAME(const lc_ch *s, Py_ssize_t n, lc_ch *out) {             \
        Py_ssize_t w = 0, i = 0;                                                    \
        while (i < n) {                                                             \
            lc_ch c = s[i];                                                         \
            if (FIRST(c)) {                                                         \
                Py_ssize_t end = MATCH(s, n, i);                                    \
                if (end > i) {                                                      \
                    out[w++] = '#';                                                 \
                    i = end;                                                        \
                    continue;                                                       \
                }                                                                   \
            }                                                                       \
            out[w++] = c;                                                           \
            i++;                                                                    \
        }                                                                           \
        return w;                                                                   \
    }

static inline int lc_first_ar(lc_ch c) { return c == 'a' || c == 'A' || c == 'r' || c == 'R'; }
static inline int lc_first_p(lc_ch c) { return c == 'p' || c == 'P'; }

LC_SUB(lc_sub_datetime, lc_digit, lc_match_datetime)
LC_SUB(lc_sub_clock, lc_digit, lc_match_clock)
LC_SUB(lc_sub_attempt, lc_first_ar, lc_match_attempt)
LC_SUB(lc_sub_duration, lc_digit, lc_match_duration)
LC_SUB(lc_sub_pid, lc_first_p, lc_match_pid)

/* shape() of s[0:n] in place; ``spare`` has room for n characters. The new length. */
static Py_ssize_t lc_shape(lc_ch *s, Py_ssize_t n, lc_ch *spare) {
    Py_ssize_t i = 0;
    /* Every pattern needs a digit: a text without one is its own shape. */
    while (i < n && !lc_digit(s[i])) i++;
    if (i == n) return n;
    n = lc_sub_datetime(s, n, spare);
    n = lc_sub_clock(spare, n, s);
    n = lc_sub_attempt(s, n, spare);
    n = lc_sub_duration(spare, n, s);
    n = lc_sub_pid(s, n, spare);
    memcpy(s, spare, (size_t)n * sizeof(lc_ch));
    return n;
}

/* shape() reads at most this many characters from each end (_exec_shape.SHAPE_WINDOW). */
#define LC_SHAPE_WINDOW ((Py_ssize_t)64 * 1024)
/* Texts up to this long are shaped in buffers on the stack. */
#define LC_SHAPE_STACK 256

/* text[start:start+count] as code points. */
static void lc_read(PyObject *text, Py_ssize_t start, Py_ssize_t count, lc_ch *out) {
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    for (Py_ssize_t i = 0; i < count; i++) out[i] = PyUnicode_READ(kind, data, start + i);
}

/* _exec_shape.shape(text) for a str (its own str data; no method of a subclass runs).
 * A new reference, or NULL with MemoryError set. */
/* Does text hold an ASCII digit? Read in its own width, nothing converted. */
static int lc_has_digit(PyObject *text) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *p = (const Py_UCS1 *)data;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (lc_digit(p[i])) return 1;
        }
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (lc_digit(PyUnicode_READ(kind, data, i))) return 1;
    }
    return 0;
}

static inline PyObject *lc_shape_str(PyObject *text) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int cut = n > 2 * LC_SHAPE_WINDOW;
    /* Every pattern needs a digit: an uncut text without one is its own shape. */
    if (!cut && !lc_has_digit(text)) {
        Py_INCREF(text);
        return text;
    }
    Py_ssize_t part = cut ? LC_SHAPE_WINDOW : n;
    Py_ssize_t total = cut ? 2 * part + 3 : n;
    lc_ch stack[2 * LC_SHAPE_STACK + 3];
    lc_ch *buffer = stack;
    if (part + total > (Py_ssize_t)(sizeof(stack) / sizeof(lc_ch))) {
        buffer = (lc_ch *)PyMem_Malloc((size_t)(part + total) * sizeof(lc_ch));
        if (buffer == NULL) return PyErr_NoMemory();
    }
    lc_ch *spare = buffer + total;
    lc_read(text, 0, part, buffer);
    Py_ssize_t length = lc_shape(buffer, part, spare);
    if (cut) {
        buffer[length++] = '\n';
        buffer[length++] = 0;
        buffer[length++] = '\n';
        lc_read(text, n - part, part, buffer + length);
        length += lc_shape(buffer + length, part, spare);
    }
    PyObject *shaped = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, buffer, length);
    if (buffer != stack) PyMem_Free(buffer);
    return shaped;
}

#endif
