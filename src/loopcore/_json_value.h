/* Where does one JSON value of an event line end, checked or not?
 *
 * The value primitives of the line reader (``_json_event.h``, which includes
 * this): ``lc_event_value`` checks a value as it finds its end (valid UTF-8,
 * well-formed escapes, numbers of the plain form, the three literals,
 * containers no deeper than LC_EVENT_DEPTH) and gives up (NULL) on whatever
 * else JSON allows, so a value taken is one both decoders read to the same
 * result; ``lc_event_skip`` finds the end of a span already checked without
 * checking it again.
 */
#ifndef LOOPCORE_JSON_VALUE_H
#define LOOPCORE_JSON_VALUE_H

#include <stddef.h>
#include <string.h>

#include "_json_canon.h"

#define LC_EVENT_DEPTH 64

static inline int lc_event_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Just past the colon after a member's key (``p`` just past the key's closing
   quote) and the white space after it; NULL when no colon follows. */
static inline const unsigned char *lc_event_colon(const unsigned char *p,
                                                  const unsigned char *end)
{
    while (p < end && lc_event_ws(*p))
        p++;
    if (p >= end || *p != ':')
        return NULL;
    p++;
    while (p < end && lc_event_ws(*p))
        p++;
    return p;
}

/* Just past the string whose opening quote is at ``p``; NULL when it does not close. */
static inline const unsigned char *lc_event_skip_string(const unsigned char *p,
                                                        const unsigned char *end)
{
    p++;
    while (p < end) {
        const unsigned char *stop;
        size_t left = (size_t)(end - p);
        const unsigned char *quote = (const unsigned char *)memchr(p, '"', left);
        if (quote == NULL)
            return NULL;
        stop = (const unsigned char *)memchr(p, '\\', (size_t)(quote - p));
        if (stop == NULL)
            return quote + 1;
        /* An escape before the quote: the byte after the backslash is skipped. */
        p = stop + 2;
    }
    return NULL;
}

/* Just past the JSON value starting at ``p`` (not checked, see above); NULL: give up. */
static const unsigned char *lc_event_skip(const unsigned char *p, const unsigned char *end)
{
    int depth = 0;
    if (p >= end)
        return NULL;
    if (*p != '{' && *p != '[') {
        if (*p == '"')
            return lc_event_skip_string(p, end);
        /* A number or a literal: up to the next delimiter. */
        while (p < end && *p != ',' && *p != '}' && *p != ']' && !lc_event_ws(*p)) {
            if (*p == '"' || *p == '{' || *p == '[' || *p == ':')
                return NULL;
            p++;
        }
        return p;
    }
    while (p < end) {
        unsigned char c = *p;
        if (c == '"') {
            p = lc_event_skip_string(p, end);
            if (p == NULL)
                return NULL;
            continue;
        }
        if (c == '{' || c == '[') {
            if (++depth > LC_EVENT_DEPTH)
                return NULL;
        } else if (c == '}' || c == ']') {
            if (--depth == 0)
                return p + 1;
        }
        p++;
    }
    return NULL;
}

/* Just past the JSON string whose opening quote is at ``p``, checked as the
 * canonical reader checks one (valid UTF-8 without surrogates, no control
 * character, well-formed escapes, no lone surrogate escape); NULL otherwise. */
static const unsigned char *lc_event_string(const unsigned char *p, const unsigned char *end)
{
    p++;
    for (;;) {
        unsigned char c;
        p = lc_json_plain16(p, end);
        while (p < end && lc_canon_plain(*p))
            p++;
        if (p >= end)
            return NULL;
        c = *p;
        if (c == '"')
            return p + 1;
        if (c < 0x20)
            return NULL;
        if (c >= 0x80) {
            int n = lc_canon_utf8(p, end);
            if (n == 0)
                return NULL;
            p += n;
            continue;
        }
        if (end - p < 2)
            return NULL;
        c = p[1];
        p += 2;
        if (c == 'u') {
            unsigned int code;
            int n = lc_canon_u_escape(p, end, &code);
            if (n == 0)
                return NULL;
            p += n;
            continue;
        }
        if (c != '"' && c != '\\' && c != '/' && c != 'b' && c != 'f' && c != 'n' && c != 'r'
            && c != 't')
            return NULL;
    }
}

static inline int lc_event_plain_number(const unsigned char *p, size_t n);

/* Just past the JSON value starting at ``p``, checked: strings as above, numbers of
 * the plain form (``lc_event_plain_number``), the three literals, containers no
 * deeper than LC_EVENT_DEPTH; NULL for anything else. Both decoders read such a
 * text, to the same values. */
static const unsigned char *lc_event_value(const unsigned char *p, const unsigned char *end,
                                           int depth)
{
    unsigned char c, close;
    if (p >= end)
        return NULL;
    c = *p;
    if (c == '"')
        return lc_event_string(p, end);
    if (c == '-' || (c >= '0' && c <= '9')) {
        const unsigned char *start = p;
        while (p < end && (*p == '-' || *p == '.' || (*p >= '0' && *p <= '9')))
            p++;
        return lc_event_plain_number(start, (size_t)(p - start)) ? p : NULL;
    }
    if (c == 't')
        return (end - p >= 4 && memcmp(p, "true", 4) == 0) ? p + 4 : NULL;
    if (c == 'f')
        return (end - p >= 5 && memcmp(p, "false", 5) == 0) ? p + 5 : NULL;
    if (c == 'n')
        return (end - p >= 4 && memcmp(p, "null", 4) == 0) ? p + 4 : NULL;
    if ((c != '{' && c != '[') || depth >= LC_EVENT_DEPTH)
        return NULL;
    close = c == '{' ? '}' : ']';
    p++;
    while (p < end && lc_event_ws(*p))
        p++;
    if (p < end && *p == close)
        return p + 1;
    for (;;) {
        if (close == '}') {
            if (p >= end || *p != '"')
                return NULL;
            p = lc_event_string(p, end);
            if (p == NULL)
                return NULL;
            p = lc_event_colon(p, end);
            if (p == NULL)
                return NULL;
        }
        p = lc_event_value(p, end, depth + 1);
        if (p == NULL)
            return NULL;
        while (p < end && lc_event_ws(*p))
            p++;
        if (p >= end)
            return NULL;
        if (*p == close)
            return p + 1;
        if (*p != ',')
            return NULL;
        p++;
        while (p < end && lc_event_ws(*p))
            p++;
    }
}

/* Is the span ``text[0:n]`` exactly the JSON text ``word``? */
static inline int lc_event_is(const unsigned char *text, size_t n, const char *word)
{
    size_t size = strlen(word);
    return n == size && memcmp(text, word, size) == 0;
}

/* Is the span a JSON number of the plain form (no exponent, an int part of at most
 * 18 digits, a fraction of at most 30): one that both decoders read alike. */
static inline int lc_event_plain_number(const unsigned char *p, size_t n)
{
    const unsigned char *end = p + n;
    size_t digits = 0;
    if (p < end && *p == '-')
        p++;
    if (p >= end || *p < '0' || *p > '9')
        return 0;
    if (*p == '0') {
        p++;
    } else {
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
            if (++digits > 18)
                return 0;
        }
    }
    if (p < end && *p == '.') {
        p++;
        digits = 0;
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
            digits++;
        }
        if (digits == 0 || digits > 30)
            return 0;
    }
    return p == end;
}

#endif /* LOOPCORE_JSON_VALUE_H */
