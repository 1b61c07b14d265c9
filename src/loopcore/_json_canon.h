/* What is the canonical encoding (SPEC §2) of a JSON text, read without building it?
 *
 * The batch reader hands the raw JSON of a call's args here instead of
 * decoding them into Python objects that would only be hashed: this header
 * reads the text and writes the bytes ``_fingerprint_py`` would write for the
 * value ``json.loads`` gives (tags, little-endian lengths and counts, mapping
 * entries sorted by their encoded bytes, an integral float as the int it
 * equals). It is deliberately narrow: whatever it is not sure of gives up
 * (returns LC_CANON_GIVE_UP) and the caller decodes the text the usual way.
 * It gives up on: malformed JSON, invalid UTF-8 (or UTF-8 encoded
 * surrogates), control characters in a string, lone surrogate escapes,
 * duplicate keys, ints outside int64, floats that overflow or whose integral
 * value is outside int64, tokens longer than LC_CANON_TOKEN, nesting deeper
 * than LC_CANON_DEPTH, objects of more than LC_CANON_ENTRIES entries, an
 * encoding over LC_CANON_MAX bytes, a top-level "title" key when asked to
 * (exec args, SPEC §8.4), and running out of memory. No nonce normalisation
 * is done: it serves call hashes, which have none (SPEC §8.5).
 *
 * Floats go through PyOS_string_to_double (correctly rounded, as float()),
 * so the GIL must be held. Strings and numbers are read by _json_scalars.h;
 * this header holds the buffer, the containers and the entry points.
 */
#ifndef LOOPCORE_JSON_CANON_H
#define LOOPCORE_JSON_CANON_H

#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "_xxh3.h"

#define LC_CANON_OK 0
#define LC_CANON_GIVE_UP 1
#define LC_CANON_DEPTH 16
#define LC_CANON_ENTRIES 64
#define LC_CANON_TOKEN 64
#define LC_CANON_MAX (1u << 20)
#define LC_CANON_STACK 2048

typedef struct {
    unsigned char *data; /* ``stack`` until it outgrows it, then malloc'd */
    size_t size;
    size_t cap;
    unsigned char stack[LC_CANON_STACK];
} lc_canon_buf;

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
    const unsigned char *start; /* the text's first byte: all from it to ``end`` is readable */
    lc_canon_buf *out;
    int untitled; /* give up on a "title" key of the top-level object */
} lc_canon_reader;

/* One entry of an object being read: where it starts and its key's length. */
typedef struct {
    size_t start;
    size_t key_size;
    size_t size;
} lc_canon_entry;

static inline void lc_canon_init(lc_canon_buf *b)
{
    b->data = b->stack;
    b->size = 0;
    b->cap = LC_CANON_STACK;
}

static inline void lc_canon_free(lc_canon_buf *b)
{
    if (b->data != b->stack)
        free(b->data);
    b->data = b->stack;
}

/* Room for ``n`` more bytes; NULL when it would pass LC_CANON_MAX or malloc fails. */
static inline unsigned char *lc_canon_room(lc_canon_buf *b, size_t n)
{
    if (b->size + n > b->cap) {
        size_t cap = b->cap * 2;
        unsigned char *grown;
        if (b->size + n > LC_CANON_MAX)
            return NULL;
        while (cap < b->size + n)
            cap *= 2;
        if (b->data == b->stack) {
            grown = (unsigned char *)malloc(cap);
            if (grown != NULL)
                memcpy(grown, b->stack, b->size);
        } else {
            grown = (unsigned char *)realloc(b->data, cap);
        }
        if (grown == NULL)
            return NULL;
        b->data = grown;
        b->cap = cap;
    }
    return b->data + b->size;
}

static inline void lc_canon_le64(unsigned char *at, uint64_t v)
{
    int i;
    for (i = 0; i < 8; i++)
        at[i] = (unsigned char)(v >> (8 * i));
}

/* A tag and a u64 (length, count or int64) appended; its offset, or -1. */
static inline Py_ssize_t lc_canon_tagged(lc_canon_buf *b, unsigned char tag, uint64_t v)
{
    unsigned char *at = lc_canon_room(b, 9);
    Py_ssize_t offset = (Py_ssize_t)b->size;
    if (at == NULL)
        return -1;
    at[0] = tag;
    lc_canon_le64(at + 1, v);
    b->size += 9;
    return offset;
}

static inline int lc_canon_byte(lc_canon_buf *b, unsigned char c)
{
    unsigned char *at = lc_canon_room(b, 1);
    if (at == NULL)
        return LC_CANON_GIVE_UP;
    *at = c;
    b->size += 1;
    return LC_CANON_OK;
}

static inline void lc_canon_ws(lc_canon_reader *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

#include "_json_scalars.h"

static int lc_canon_value(lc_canon_reader *r, int depth);

static int lc_canon_literal(lc_canon_reader *r, const char *word, size_t n, unsigned char tag)
{
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0)
        return LC_CANON_GIVE_UP;
    r->p += n;
    return lc_canon_byte(r->out, tag);
}

/* After a container's item: 1 past its closing ``close``, 0 past a comma (and the
 * white space after it), -1 on anything else (give up). */
static inline int lc_canon_after_item(lc_canon_reader *r, unsigned char close)
{
    lc_canon_ws(r);
    if (r->p >= r->end)
        return -1;
    if (*r->p == close) {
        r->p++;
        return 1;
    }
    if (*r->p != ',')
        return -1;
    r->p++;
    lc_canon_ws(r);
    return 0;
}

static int lc_canon_array(lc_canon_reader *r, int depth)
{
    lc_canon_buf *b = r->out;
    Py_ssize_t head = lc_canon_tagged(b, 'l', 0);
    uint64_t count = 0;
    int next;
    if (head < 0)
        return LC_CANON_GIVE_UP;
    r->p++;
    lc_canon_ws(r);
    if (r->p < r->end && *r->p == ']') {
        r->p++;
        return LC_CANON_OK;
    }
    for (;;) {
        if (lc_canon_value(r, depth + 1) != LC_CANON_OK)
            return LC_CANON_GIVE_UP;
        count++;
        next = lc_canon_after_item(r, ']');
        if (next < 0)
            return LC_CANON_GIVE_UP;
        if (next)
            break;
    }
    lc_canon_le64(b->data + head + 1, count);
    return LC_CANON_OK;
}

/* Key encodings are prefix-free: two different keys differ within the shorter. */
static inline int lc_canon_key_cmp(const unsigned char *data, const lc_canon_entry *a,
                                   const lc_canon_entry *b)
{
    size_t n = a->key_size < b->key_size ? a->key_size : b->key_size;
    int order = memcmp(data + a->start, data + b->start, n);
    if (order == 0 && a->key_size != b->key_size)
        order = a->key_size < b->key_size ? -1 : 1;
    return order;
}

static int lc_canon_object(lc_canon_reader *r, int depth)
{
    lc_canon_buf *b = r->out;
    lc_canon_entry entries[LC_CANON_ENTRIES];
    Py_ssize_t head = lc_canon_tagged(b, 'd', 0);
    size_t count = 0, i, j, body, total;
    int next;
    unsigned char spare[512];
    unsigned char *copy;
    if (head < 0)
        return LC_CANON_GIVE_UP;
    body = b->size;
    r->p++;
    lc_canon_ws(r);
    if (r->p < r->end && *r->p == '}') {
        r->p++;
        return LC_CANON_OK;
    }
    for (;;) {
        lc_canon_entry *entry;
        if (count == LC_CANON_ENTRIES || r->p >= r->end || *r->p != '"')
            return LC_CANON_GIVE_UP;
        entry = &entries[count];
        entry->start = b->size;
        if (lc_canon_string(r) != LC_CANON_OK)
            return LC_CANON_GIVE_UP;
        entry->key_size = b->size - entry->start;
        if (r->untitled && depth == 1 && entry->key_size == 14
            && memcmp(b->data + entry->start + 9, "title", 5) == 0)
            return LC_CANON_GIVE_UP; /* exec args the reference reduces first */
        lc_canon_ws(r);
        if (r->p >= r->end || *r->p != ':')
            return LC_CANON_GIVE_UP;
        r->p++;
        lc_canon_ws(r);
        if (lc_canon_value(r, depth + 1) != LC_CANON_OK)
            return LC_CANON_GIVE_UP;
        entry->size = b->size - entry->start;
        count++;
        next = lc_canon_after_item(r, '}');
        if (next < 0)
            return LC_CANON_GIVE_UP;
        if (next)
            break;
    }
    lc_canon_le64(b->data + head + 1, (uint64_t)count);
    if (count < 2)
        return LC_CANON_OK;
    /* Insertion sort by key bytes (few entries); equal keys: json keeps the
     * last of them, so the reference's value is not simply one we read. */
    for (i = 1; i < count; i++) {
        lc_canon_entry moving = entries[i];
        int order = 0;
        for (j = i; j > 0; j--) {
            order = lc_canon_key_cmp(b->data, &entries[j - 1], &moving);
            if (order <= 0)
                break;
            entries[j] = entries[j - 1];
        }
        if (order == 0 && j > 0)
            return LC_CANON_GIVE_UP; /* a duplicate key */
        entries[j] = moving;
    }
    total = b->size - body;
    copy = total <= sizeof(spare) ? spare : (unsigned char *)malloc(total);
    if (copy == NULL)
        return LC_CANON_GIVE_UP;
    memcpy(copy, b->data + body, total);
    j = body;
    for (i = 0; i < count; i++) {
        memcpy(b->data + j, copy + (entries[i].start - body), entries[i].size);
        j += entries[i].size;
    }
    if (copy != spare)
        free(copy);
    return LC_CANON_OK;
}

static int lc_canon_value(lc_canon_reader *r, int depth)
{
    unsigned char c;
    if (r->p >= r->end)
        return LC_CANON_GIVE_UP;
    c = *r->p;
    if (c == '"')
        return lc_canon_string(r);
    if (c == '-' || (c >= '0' && c <= '9'))
        return lc_canon_number(r);
    if (c == '{' || c == '[') {
        if (depth >= LC_CANON_DEPTH)
            return LC_CANON_GIVE_UP;
        return c == '{' ? lc_canon_object(r, depth) : lc_canon_array(r, depth);
    }
    if (c == 't')
        return lc_canon_literal(r, "true", 4, 'T');
    if (c == 'f')
        return lc_canon_literal(r, "false", 5, 'F');
    if (c == 'n')
        return lc_canon_literal(r, "null", 4, 'N');
    return LC_CANON_GIVE_UP; /* NaN, Infinity, anything else */
}

/* Append the canonical encoding of the JSON text ``text[0:size]`` (one value,
 * whitespace around it allowed) to ``out``; LC_CANON_GIVE_UP leaves ``out``
 * partly written. ``untitled``: give up on a top-level "title" key. */
static inline int lc_canon_json(lc_canon_buf *out, const unsigned char *text, size_t size,
                                int untitled)
{
    lc_canon_reader r;
    r.p = text;
    r.end = text + size;
    r.start = text;
    r.out = out;
    r.untitled = untitled;
    lc_canon_ws(&r);
    if (lc_canon_value(&r, 1) != LC_CANON_OK)
        return LC_CANON_GIVE_UP;
    lc_canon_ws(&r);
    return r.p == r.end ? LC_CANON_OK : LC_CANON_GIVE_UP;
}

/* The call hash (``hash_call``) of a tool name given as UTF-8 and its args
 * given as JSON: xxh3-64 of ``domain`` + ``l`` 2 + ``s`` name + the args'
 * encoding, into ``*hash``. LC_CANON_GIVE_UP: decode the args instead. */
static inline int lc_canon_call_hash(const unsigned char *domain, size_t domain_size,
                                     const unsigned char *name, size_t name_size,
                                     const unsigned char *args, size_t args_size, int untitled,
                                     uint64_t *hash)
{
    lc_canon_buf buf;
    unsigned char *at;
    int status = LC_CANON_GIVE_UP;
    lc_canon_init(&buf);
    at = lc_canon_room(&buf, domain_size);
    if (at == NULL)
        goto done;
    memcpy(at, domain, domain_size);
    buf.size += domain_size;
    if (lc_canon_tagged(&buf, 'l', 2) < 0 || lc_canon_tagged(&buf, 's', name_size) < 0)
        goto done;
    at = lc_canon_room(&buf, name_size);
    if (at == NULL)
        goto done;
    memcpy(at, name, name_size);
    buf.size += name_size;
    if (lc_canon_json(&buf, args, args_size, untitled) != LC_CANON_OK)
        goto done;
    *hash = loopcore_xxh3_64(buf.data, buf.size);
    status = LC_CANON_OK;
done:
    lc_canon_free(&buf);
    return status;
}

#endif /* LOOPCORE_JSON_CANON_H */
