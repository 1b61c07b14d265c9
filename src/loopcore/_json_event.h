/* Where are the fields of one loopcore event line, found without building it?
 *
 * The compiled reading loop (batch/_rows_c.pyx) hands each line here before
 * decoding it: this header finds the span of JSON text of each event field
 * (``type``, ``tool``, ``args``, ...) so that the loop makes only the few str
 * values it must and hashes the rest from the text; the members of an object
 * inside it (an exec result's ``details``) are found the same way. It is
 * narrower than JSON
 * on purpose, and gives up (LC_EVENT_GIVE_UP) on any line it is not sure of,
 * which the loop then decodes the usual way: a byte-order mark, a key with an
 * escape or a non-ASCII byte, an unknown or repeated field, a value nested
 * deeper than LC_EVENT_DEPTH, a line that does not end after its object.
 *
 * The line's values are checked as they are found (``lc_event_value``): valid
 * UTF-8, well-formed escapes, plain numbers, the three literals; whatever else
 * JSON allows (exponents, huge numbers, lone surrogate escapes) gives up, so a
 * line taken here is one both decoders read, to the same values. The members
 * of a span already checked are found without checking them again
 * (``lc_event_skip``: a string ends at its first unescaped quote, a container
 * at its matching bracket).
 */
#ifndef LOOPCORE_JSON_EVENT_H
#define LOOPCORE_JSON_EVENT_H

#include <stddef.h>
#include <string.h>

#include "_json_canon.h"
#include "_json_value.h"

#define LC_EVENT_OK 0
#define LC_EVENT_GIVE_UP 1

/* The fields, in the order of formats._fast._Event. */
enum {
    LC_EV_TYPE,
    LC_EV_TOOL,
    LC_EV_ARGS,
    LC_EV_RESULT,
    LC_EV_ERROR,
    LC_EV_CALL_ID,
    LC_EV_SESSION,
    LC_EV_RUN_ID,
    LC_EV_TS,
    LC_EV_COUNT
};

/* The members of an exec result's ``details`` the exec rule reads (batch/_rows_exec.pxi),
 * in this order. */
#define LC_EXEC_MEMBERS 4

/* What the line's scan found of its result while checking it (``lc_event_result``): with
 * ``found``, the result is an object of ``content`` and ``details`` only, each once, whose
 * ``details`` is an object with none of the members below repeated, and these are the
 * members' spans; the exec rule need not look for them again. */
typedef struct {
    const unsigned char *start[LC_EXEC_MEMBERS];
    size_t size[LC_EXEC_MEMBERS];
    unsigned int present;
    int found;
} lc_event_details;

typedef struct {
    const unsigned char *start[LC_EV_COUNT];
    size_t size[LC_EV_COUNT];
    unsigned int present; /* bit ``1 << field`` for each field the line has */
    lc_event_details details; /* of its result, when an object */
} lc_event;

static const char *const lc_event_result_names[2] = {"content", "details"};
static const char *const lc_event_detail_names[LC_EXEC_MEMBERS] = {
    "status", "exitCode", "timedOut", "aggregated"};

/* Which field a key (its bytes between the quotes) names; -1: none. */
static inline int lc_event_field(const unsigned char *key, size_t n)
{
#define LC_EVENT_IS(word) (n == sizeof(word) - 1 && memcmp(key, word, n) == 0)
    switch (n) {
    case 2:
        return LC_EVENT_IS("ts") ? LC_EV_TS : -1;
    case 4:
        if (LC_EVENT_IS("type"))
            return LC_EV_TYPE;
        if (LC_EVENT_IS("tool"))
            return LC_EV_TOOL;
        return LC_EVENT_IS("args") ? LC_EV_ARGS : -1;
    case 5:
        return LC_EVENT_IS("error") ? LC_EV_ERROR : -1;
    case 6:
        if (LC_EVENT_IS("result"))
            return LC_EV_RESULT;
        return LC_EVENT_IS("run_id") ? LC_EV_RUN_ID : -1;
    case 7:
        return LC_EVENT_IS("session") ? LC_EV_SESSION : -1;
    case 12:
        return LC_EVENT_IS("tool_call_id") ? LC_EV_CALL_ID : -1;
    default:
        return -1;
    }
#undef LC_EVENT_IS
}

/* Which of ``count`` names a key (its bytes between the quotes) is; -1: none. A key
 * holds no NUL (it would have given up), so ``strncmp`` stops within both. */
static inline int lc_event_name(const unsigned char *key, size_t n, const char *const *names,
                                int count)
{
    int i;
    for (i = 0; i < count; i++)
        if ((unsigned char)names[i][0] == key[0] && strncmp(names[i], (const char *)key, n) == 0
            && names[i][n] == '\0')
            return i;
    return -1;
}

/* The bytes that end the plain run of a key: its closing quote, or one that gives
 * up (an escape, a control character, a non-ASCII byte). */
static const unsigned char lc_event_key_stop[256] = {
    /* 0x00-0x1f */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    /* 0x20-0x7f: the quote (0x22) and the backslash (0x5c) */
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    /* 0x80-0xff */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
};

/* Just past the object at ``p`` (at depth ``depth``), checked as ``lc_event_value``
 * checks it, with the spans of its members named by ``names`` (``start``, ``size``,
 * ``present``); ``*clean`` is cleared when a key repeats one of them, or names none
 * of them and ``others`` is 0. The member ``inner`` (-1: none), when an object, is
 * read the same way into ``deeper`` (the detail names, others allowed). NULL when not
 * read here: not JSON, or a key this reader leaves (an escape, a non-ASCII byte), an
 * empty object, a depth past LC_EVENT_DEPTH; the caller checks it the usual way. */
static const unsigned char *lc_event_members(const unsigned char *p, const unsigned char *end,
                                             int depth, const char *const *names, int count,
                                             int others, const unsigned char **start,
                                             size_t *size, unsigned int *present, int *clean,
                                             int inner, lc_event_details *deeper)
{
    if (depth >= LC_EVENT_DEPTH || p >= end || *p != '{')
        return NULL;
    p++;
    *present = 0;
    for (;;) {
        const unsigned char *key, *value;
        int field, repeated;
        while (p < end && lc_event_ws(*p))
            p++;
        if (p >= end || *p != '"')
            return NULL;
        key = ++p;
        while (p < end && !lc_event_key_stop[*p])
            p++;
        if (p >= end || *p != '"')
            return NULL;
        field = lc_event_name(key, (size_t)(p - key), names, count);
        repeated = field >= 0 && (*present & (1u << field));
        if ((field < 0 && !others) || repeated)
            *clean = 0;
        p = lc_event_colon(p + 1, end);
        if (p == NULL)
            return NULL;
        value = p;
        if (field >= 0 && field == inner && !repeated && p < end && *p == '{') {
            int tidy = 1;
            p = lc_event_members(p, end, depth + 1, lc_event_detail_names, LC_EXEC_MEMBERS, 1,
                                 deeper->start, deeper->size, &deeper->present, &tidy, -1,
                                 NULL);
            deeper->found = tidy;
        } else {
            p = lc_event_value(p, end, depth + 1);
        }
        if (p == NULL)
            return NULL;
        if (field >= 0 && !repeated) {
            start[field] = value;
            size[field] = (size_t)(p - value);
            *present |= 1u << field;
        }
        while (p < end && lc_event_ws(*p))
            p++;
        if (p >= end)
            return NULL;
        if (*p == '}')
            return p + 1;
        if (*p != ',')
            return NULL;
        p++;
    }
}

/* Just past the result object at ``p``, checked as ``lc_event_value(p, end, 1)``
 * checks it (so it is read whole once), and what it holds of the exec shape into
 * ``details`` (see ``lc_event_details``). */
static const unsigned char *lc_event_result(const unsigned char *p, const unsigned char *end,
                                            lc_event_details *details)
{
    const unsigned char *start[2];
    size_t size[2];
    unsigned int present = 0;
    int clean = 1;
    const unsigned char *past;
    details->found = 0;
    details->present = 0;
    past = lc_event_members(p, end, 1, lc_event_result_names, 2, 0, start, size, &present,
                            &clean, 1, details);
    if (past == NULL) {
        details->found = 0;
        return lc_event_value(p, end, 1);
    }
    if (!clean || !(present & 2u))
        details->found = 0;
    return past;
}

/* Find the members of the JSON object that is the whole of ``text[0:n]`` (white
 * space around it allowed): member ``i`` is the one whose key is ``names[i]``,
 * or with ``names`` NULL an event field (``lc_event_field``); ``others``: may
 * a key name none of them (it is skipped), or does it give up? A key is
 * compared as written (one with an escape gives up), and one repeated gives up
 * (the last would win). LC_EVENT_GIVE_UP: read the text the usual way. */
static int lc_event_object(const unsigned char *text, size_t n, const char *const *names,
                           int count, int others, int check, const unsigned char **start,
                           size_t *size, unsigned int *present, lc_event_details *details)
{
    const unsigned char *p = text;
    const unsigned char *end = text + n;
    *present = 0;
    while (p < end && lc_event_ws(*p))
        p++;
    if (p >= end || *p != '{')
        return LC_EVENT_GIVE_UP;
    p++;
    for (;;) {
        const unsigned char *key, *value;
        int field;
        while (p < end && lc_event_ws(*p))
            p++;
        if (p >= end || *p != '"')
            return LC_EVENT_GIVE_UP; /* an empty object, a trailing comma, ... */
        key = ++p;
        while (p < end && !lc_event_key_stop[*p])
            p++;
        if (p >= end || *p != '"')
            return LC_EVENT_GIVE_UP;
        field = names == NULL ? lc_event_field(key, (size_t)(p - key))
                              : lc_event_name(key, (size_t)(p - key), names, count);
        if ((field < 0 && !others) || (field >= 0 && (*present & (1u << field))))
            return LC_EVENT_GIVE_UP; /* unknown, or repeated */
        p = lc_event_colon(p + 1, end);
        if (p == NULL)
            return LC_EVENT_GIVE_UP;
        value = p;
        if (details != NULL && check && field == LC_EV_RESULT && p < end && *p == '{')
            p = lc_event_result(p, end, details);
        else
            p = check ? lc_event_value(p, end, 1) : lc_event_skip(p, end);
        if (p == NULL || p == value)
            return LC_EVENT_GIVE_UP;
        if (field >= 0) {
            start[field] = value;
            size[field] = (size_t)(p - value);
            *present |= 1u << field;
        }
        while (p < end && lc_event_ws(*p))
            p++;
        if (p >= end)
            return LC_EVENT_GIVE_UP;
        if (*p == '}') {
            p++;
            break;
        }
        if (*p != ',')
            return LC_EVENT_GIVE_UP;
        p++;
    }
    while (p < end && lc_event_ws(*p))
        p++;
    return p == end ? LC_EVENT_OK : LC_EVENT_GIVE_UP;
}

/* Find the fields of the event object that is the whole line ``line[0:n]``
 * (white space around it allowed); LC_EVENT_GIVE_UP: read it the usual way. */
static inline int lc_event_scan(const unsigned char *line, size_t n, lc_event *ev)
{
    ev->details.found = 0;
    return lc_event_object(line, n, NULL, LC_EV_COUNT, 0, 1, ev->start, ev->size, &ev->present,
                           &ev->details);
}

#endif /* LOOPCORE_JSON_EVENT_H */
