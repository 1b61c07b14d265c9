/* How is one JSON scalar token, a string or a number, written as its canonical bytes?
 *
 * Part of the JSON reader of ``_json_canon.h`` (which includes this header after
 * its buffer and reader types): a string as ``s`` + length + UTF-8 (escapes
 * decoded, invalid UTF-8, lone surrogates and control characters given up on), a
 * number as ``i`` + int64 or ``f`` + double the way ``json.loads`` reads it
 * (floats through PyOS_string_to_double, correctly rounded; an integral float as
 * the int it equals; anything outside int64 given up on).
 */
#ifndef LOOPCORE_JSON_SCALARS_H
#define LOOPCORE_JSON_SCALARS_H

#ifndef LOOPCORE_JSON_CANON_H
#error "_json_scalars.h is included by _json_canon.h, after its types"
#endif

static inline int lc_canon_hex4(const unsigned char *p, unsigned int *out)
{
    unsigned int v = 0;
    int i;
    for (i = 0; i < 4; i++) {
        unsigned char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned int)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned int)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned int)(c - 'A' + 10);
        else
            return LC_CANON_GIVE_UP;
    }
    *out = v;
    return LC_CANON_OK;
}

/* The code point of a \u escape whose four hex digits start at ``p`` (a
   surrogate pair, \uD8xx\uDCxx, as the one code point it stands for): the
   bytes read from ``p`` (4 or 10), or 0 for a bad escape or a lone surrogate,
   which json and msgspec would not read alike. */
static inline int lc_canon_u_escape(const unsigned char *p, const unsigned char *end,
                                    unsigned int *code)
{
    unsigned int low;
    if (end - p < 4 || lc_canon_hex4(p, code) != LC_CANON_OK)
        return 0;
    if (*code >= 0xDC00 && *code <= 0xDFFF)
        return 0; /* a lone low surrogate */
    if (*code < 0xD800 || *code > 0xDBFF)
        return 4;
    if (end - p < 10 || p[4] != '\\' || p[5] != 'u' || lc_canon_hex4(p + 6, &low) != LC_CANON_OK
        || low < 0xDC00 || low > 0xDFFF)
        return 0; /* a lone high surrogate */
    *code = 0x10000 + ((*code - 0xD800) << 10) + (low - 0xDC00);
    return 10;
}

/* The length of the valid UTF-8 sequence (2 to 4 bytes) at ``p``, or 0: no
 * overlong forms, no surrogates, nothing past U+10FFFF. */
static inline int lc_canon_utf8(const unsigned char *p, const unsigned char *end)
{
    unsigned char c = p[0];
    if (c >= 0xC2 && c <= 0xDF) {
        if (end - p < 2 || (p[1] & 0xC0) != 0x80)
            return 0;
        return 2;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (end - p < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80)
            return 0;
        if (c == 0xE0 && p[1] < 0xA0)
            return 0; /* overlong */
        if (c == 0xED && p[1] >= 0xA0)
            return 0; /* a surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (end - p < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80
            || (p[3] & 0xC0) != 0x80)
            return 0;
        if (c == 0xF0 && p[1] < 0x90)
            return 0; /* overlong */
        if (c == 0xF4 && p[1] >= 0x90)
            return 0; /* past U+10FFFF */
        return 4;
    }
    return 0;
}

/* ``code`` as UTF-8 at ``at`` (room made by the caller); just past it. */
static inline unsigned char *lc_canon_put_code(unsigned char *at, unsigned int code)
{
    if (code < 0x80) {
        at[0] = (unsigned char)code;
        return at + 1;
    }
    if (code < 0x800) {
        at[0] = (unsigned char)(0xC0 | (code >> 6));
        at[1] = (unsigned char)(0x80 | (code & 0x3F));
        return at + 2;
    }
    if (code < 0x10000) {
        at[0] = (unsigned char)(0xE0 | (code >> 12));
        at[1] = (unsigned char)(0x80 | ((code >> 6) & 0x3F));
        at[2] = (unsigned char)(0x80 | (code & 0x3F));
        return at + 3;
    }
    at[0] = (unsigned char)(0xF0 | (code >> 18));
    at[1] = (unsigned char)(0x80 | ((code >> 12) & 0x3F));
    at[2] = (unsigned char)(0x80 | ((code >> 6) & 0x3F));
    at[3] = (unsigned char)(0x80 | (code & 0x3F));
    return at + 4;
}

/* Bytes a string copies as they are: printable ASCII but the quote and the backslash. */
static inline int lc_canon_plain(unsigned char c)
{
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/* Past the run of plain string bytes that starts at ``p``, taken 16 at a time
 * while 16 remain: a quote, a backslash, a control or a non-ASCII byte stops
 * it (a signed compare with 0x20 catches the last two); the byte loop after it
 * finishes the run. Without SSE2, ``p`` itself. */
static inline const unsigned char *lc_json_plain16(const unsigned char *p,
                                                   const unsigned char *end)
{
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i slash = _mm_set1_epi8('\\');
    const __m128i space = _mm_set1_epi8(0x20);
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
        __m128i stop = _mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, slash)),
            _mm_cmplt_epi8(v, space));
        int bits = _mm_movemask_epi8(stop);
        if (bits != 0)
            return p + __builtin_ctz((unsigned int)bits);
        p += 16;
    }
#else
    (void)end;
#endif
    return p;
}

/* Past the run of plain string bytes at ``p``, as ``lc_json_plain16`` finds it, the
 * last fewer than 16 bytes before ``end`` taken in one vector too: the 16 that end at
 * ``end``, when the text from ``start`` holds as many (so the load stays inside it),
 * the bytes before ``p`` left out of it. A string that ends its text (a span read
 * alone) would otherwise finish byte by byte. */
static inline const unsigned char *lc_json_plain_run(const unsigned char *p,
                                                     const unsigned char *end,
                                                     const unsigned char *start)
{
    p = lc_json_plain16(p, end);
#if defined(__SSE2__)
    if (p < end && end - p < 16 && end - start >= 16) {
        const unsigned char *last = end - 16;
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)last);
        __m128i stop = _mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                         _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
            _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));
        unsigned int bits = (unsigned int)_mm_movemask_epi8(stop) >> (unsigned int)(p - last);
        return bits != 0 ? p + __builtin_ctz(bits) : end;
    }
#else
    (void)start;
#endif
    return p;
}

/* A string (``r->p`` on its opening quote) as ``s`` + length + UTF-8.
 *
 * Its decoded bytes are never more than the text they come from (an escape is
 * longer than what it stands for, UTF-8 is copied), so room for the rest of
 * the text, and 16 bytes of slack for whole-vector stores, is made once. */
static int lc_canon_string(lc_canon_reader *r)
{
    lc_canon_buf *b = r->out;
    const unsigned char *p = r->p + 1;
    const unsigned char *end = r->end;
    size_t head = b->size;
    unsigned char *out;
    if (lc_canon_room(b, 9 + (size_t)(end - p) + 16) == NULL)
        return LC_CANON_GIVE_UP;
    b->data[head] = 's';
    out = b->data + head + 9;
    for (;;) {
        unsigned char c;
        {
            const unsigned char *run = lc_json_plain_run(p, end, r->start);
            memcpy(out, p, (size_t)(run - p));
            out += run - p;
            p = run;
        }
        while (p < end && lc_canon_plain(*p))
            *out++ = *p++;
        if (p >= end)
            return LC_CANON_GIVE_UP;
        c = *p;
        if (c == '"') {
            p++;
            break;
        }
        if (c < 0x20)
            return LC_CANON_GIVE_UP; /* json refuses a raw control character */
        if (c >= 0x80) {
            int n = lc_canon_utf8(p, end);
            if (n == 0)
                return LC_CANON_GIVE_UP;
            memcpy(out, p, (size_t)n);
            out += n;
            p += n;
            continue;
        }
        /* A backslash escape. */
        if (end - p < 2)
            return LC_CANON_GIVE_UP;
        c = p[1];
        p += 2;
        if (c == 'u') {
            unsigned int code;
            int n = lc_canon_u_escape(p, end, &code);
            if (n == 0)
                return LC_CANON_GIVE_UP;
            p += n;
            out = lc_canon_put_code(out, code);
            continue;
        }
        switch (c) {
        case '"': c = '"'; break;
        case '\\': c = '\\'; break;
        case '/': c = '/'; break;
        case 'b': c = '\b'; break;
        case 'f': c = '\f'; break;
        case 'n': c = '\n'; break;
        case 'r': c = '\r'; break;
        case 't': c = '\t'; break;
        default: return LC_CANON_GIVE_UP;
        }
        *out++ = c;
    }
    b->size = (size_t)(out - b->data);
    lc_canon_le64(b->data + head + 1, (uint64_t)(b->size - head - 9));
    r->p = p;
    return LC_CANON_OK;
}

static inline int lc_canon_digit(const unsigned char *p, const unsigned char *end)
{
    return p < end && *p >= '0' && *p <= '9';
}

/* A number: ``i`` + int64 for an int (or an integral float), ``f`` + double. */
static int lc_canon_number(lc_canon_reader *r)
{
    const unsigned char *start = r->p;
    const unsigned char *p = start;
    const unsigned char *end = r->end;
    int negative = 0, is_float = 0, overflow = 0;
    uint64_t magnitude = 0;
    if (p < end && *p == '-') {
        negative = 1;
        p++;
    }
    if (!lc_canon_digit(p, end))
        return LC_CANON_GIVE_UP;
    if (*p == '0') {
        p++;
    } else {
        while (lc_canon_digit(p, end)) {
            uint64_t digit = (uint64_t)(*p - '0');
            /* Past uint64 an int gives up; a float's digits are read by strtod. */
            if (magnitude > (UINT64_MAX - digit) / 10)
                overflow = 1;
            else
                magnitude = magnitude * 10 + digit;
            p++;
        }
    }
    if (p < end && *p == '.') {
        is_float = 1;
        p++;
        if (!lc_canon_digit(p, end))
            return LC_CANON_GIVE_UP;
        while (lc_canon_digit(p, end))
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        is_float = 1;
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (!lc_canon_digit(p, end))
            return LC_CANON_GIVE_UP;
        while (lc_canon_digit(p, end))
            p++;
    }
    r->p = p;
    if (!is_float) {
        int64_t value;
        if (overflow)
            return LC_CANON_GIVE_UP;
        if (negative) {
            if (magnitude > (uint64_t)INT64_MAX + 1)
                return LC_CANON_GIVE_UP;
            value = (int64_t)(0 - magnitude);
        } else {
            if (magnitude > (uint64_t)INT64_MAX)
                return LC_CANON_GIVE_UP;
            value = (int64_t)magnitude;
        }
        return lc_canon_tagged(r->out, 'i', (uint64_t)value) < 0 ? LC_CANON_GIVE_UP : LC_CANON_OK;
    }
    {
        char token[LC_CANON_TOKEN + 1];
        char *stop = NULL;
        size_t n = (size_t)(p - start);
        double value;
        uint64_t bits;
        if (n > LC_CANON_TOKEN)
            return LC_CANON_GIVE_UP;
        memcpy(token, start, n);
        token[n] = '\0';
        value = PyOS_string_to_double(token, &stop, NULL);
        if (value == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return LC_CANON_GIVE_UP;
        }
        if (stop != token + n || isinf(value) || isnan(value))
            return LC_CANON_GIVE_UP; /* 1e400: json reads inf, msgspec refuses it */
        if (value == floor(value)) {
            /* An integral float is the int it equals: in int64, or give up. */
            if (value < -9223372036854775808.0 || value >= 9223372036854775808.0)
                return LC_CANON_GIVE_UP;
            return lc_canon_tagged(r->out, 'i', (uint64_t)(int64_t)value) < 0
                ? LC_CANON_GIVE_UP : LC_CANON_OK;
        }
        memcpy(&bits, &value, 8);
        return lc_canon_tagged(r->out, 'f', bits) < 0 ? LC_CANON_GIVE_UP : LC_CANON_OK;
    }
}

#endif /* LOOPCORE_JSON_SCALARS_H */
