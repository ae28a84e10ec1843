/* WebDataset index objects to shard indexes (see
 * include/objmount/shard_wds.h): DALI's wds2idx text and wids' pickle. */
#include "objmount/shard_wds.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((format(printf, 4, 5))) static int fail(int rc, char *err, size_t errlen,
                                                      const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* ---- what both formats check ---- */

struct ext_state {
    struct om_shard_index *ix;
    uint64_t prev_end; /* end of the previous member's data */
    uint64_t count;
    char *err;
    size_t errlen;
};

/* One regular file of an index object, in tar order: it must leave room
 * for its header after the previous member and lie inside the shard. */
static int add_ext(struct ext_state *st, const char *name, size_t nlen, uint64_t off, uint64_t size)
{
    struct om_shard_index *ix = st->ix;
    uint64_t i = st->count++;
    if (off % OM_SHARD_BLOCK != 0)
        return fail(-EBADMSG, st->err, st->errlen,
                    "member %" PRIu64 ": offset %" PRIu64 " is not a multiple of 512", i, off);
    uint64_t room = (st->prev_end + OM_SHARD_BLOCK - 1) / OM_SHARD_BLOCK * OM_SHARD_BLOCK;
    if (off < room + OM_SHARD_BLOCK)
        return fail(-EBADMSG, st->err, st->errlen,
                    "member %" PRIu64 " at offset %" PRIu64
                    " leaves no room for its header after the one before (not in tar order)",
                    i, off);
    if (size > ix->shard_size || off > ix->shard_size - size)
        return fail(-ESTALE, st->err, st->errlen,
                    "member %" PRIu64 " (%" PRIu64 " bytes at %" PRIu64
                    ") lies past the shard's end at %" PRIu64 ": an index of another version",
                    i, size, off, ix->shard_size);
    struct om_shard_entry e = {
        .name = name,
        .name_len = nlen,
        .offset = off,
        .size = size,
        .type = OM_SHARD_FILE,
    };
    int rc = om_shard_index_add(ix, &e);
    if (rc < 0)
        return fail(rc, st->err, st->errlen, "member %" PRIu64 ": %s", i,
                    rc == -EFBIG ? "beyond the bounds of a shard index" : strerror(-rc));
    st->prev_end = off + size;
    return 0;
}

static int finish_ext(struct om_shard_index *ix, int rc, char *err, size_t errlen)
{
    if (rc == 0) {
        rc = om_shard_index_finish(ix);
        if (rc)
            fail(rc, err, errlen, "%s", strerror(-rc));
    }
    if (rc)
        om_shard_index_free(ix);
    return rc;
}

/* ---- DALI ---- */

struct cursor {
    const char *p, *end;
    uint64_t line; /* 1-based, of the text */
};

/* The next line (without its '\n' or "\r\n"), or false at the end. */
static bool next_line(struct cursor *c, const char **s, size_t *len)
{
    if (c->p >= c->end)
        return false;
    const char *nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
    const char *e = nl ? nl : c->end;
    *s = c->p;
    *len = (size_t)(e - c->p);
    if (*len && (*s)[*len - 1] == '\r')
        (*len)--;
    c->p = nl ? nl + 1 : c->end;
    c->line++;
    return true;
}

/* The next token of s[0..len) from *at, separated by spaces or tabs. */
static bool next_token(const char *s, size_t len, size_t *at, const char **t, size_t *tlen)
{
    while (*at < len && (s[*at] == ' ' || s[*at] == '\t'))
        (*at)++;
    if (*at >= len)
        return false;
    size_t b = *at;
    while (*at < len && s[*at] != ' ' && s[*at] != '\t')
        (*at)++;
    *t = s + b;
    *tlen = *at - b;
    return true;
}

static bool blank(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return false;
    return true;
}

/* wds2idx's extension of a name: after the first '.' of its last
 * segment, or (its quirk) the whole name when there is none. */
static void dali_ext(const char *name, size_t len, const char **ext, size_t *elen)
{
    size_t start = 0;
    for (size_t i = 0; i < len; i++)
        if (name[i] == '/')
            start = i + 1;
    const char *dot = memchr(name + start, '.', len - start);
    *ext = dot ? dot + 1 : name;
    *elen = dot ? (size_t)(name + len - (dot + 1)) : len;
}

static int dali_sample(struct ext_state *st, const char *s, size_t len, uint64_t line)
{
    size_t at = 0;
    int members = 0;
    const char *t[4];
    size_t tl[4];
    for (;;) {
        int n = 0;
        while (n < 4 && next_token(s, len, &at, &t[n], &tl[n]))
            n++;
        if (n == 0)
            break;
        if (n < 4)
            return fail(-EBADMSG, st->err, st->errlen,
                        "line %" PRIu64 ": a member needs EXT OFFSET SIZE NAME", line);
        uint64_t off, size;
        if (om_parse_uint_n(t[1], tl[1], OM_UINT_MAX, &off) ||
            om_parse_uint_n(t[2], tl[2], OM_UINT_MAX, &size))
            return fail(-EBADMSG, st->err, st->errlen, "line %" PRIu64 ": a malformed number",
                        line);
        const char *ext;
        size_t elen;
        dali_ext(t[3], tl[3], &ext, &elen);
        if (elen != tl[0] || memcmp(ext, t[0], elen) != 0)
            return fail(-EBADMSG, st->err, st->errlen,
                        "line %" PRIu64 ": extension %.*s does not match its name", line,
                        (int)OM_MIN(tl[0], 64), t[0]);
        if (memchr(t[3], '\\', tl[3]))
            return fail(-EINVAL, st->err, st->errlen,
                        "line %" PRIu64 ": a name escaped by tar's listing (it holds '\\')", line);
        int rc = add_ext(st, t[3], tl[3], off, size);
        if (rc) {
            size_t n0 = strlen(st->err);
            if (n0 < st->errlen)
                snprintf(st->err + n0, st->errlen - n0, " (line %" PRIu64 ")", line);
            return rc;
        }
        members++;
    }
    if (!members)
        return fail(-EBADMSG, st->err, st->errlen, "line %" PRIu64 ": a sample with no member",
                    line);
    return 0;
}

int om_shard_wds_dali(const char *text, size_t len, uint64_t shard_size,
                      const struct om_shard_limits *lim, struct om_shard_index *ix, char *err,
                      size_t errlen)
{
    om_shard_index_init(ix, lim, shard_size, OM_SHARD_SRC_DALI);
    struct cursor c = {.p = text, .end = text + len};
    const char *s, *tok;
    size_t slen, tlen, at = 0;
    if (!next_line(&c, &s, &slen) || !next_token(s, slen, &at, &tok, &tlen) || tok[0] != 'v')
        return fail(-EBADMSG, err, errlen, "not a DALI index (no version)");
    if (tlen == 4 && memcmp(tok, "v1.1", 4) == 0)
        return fail(-EPROTONOSUPPORT, err, errlen,
                    "a DALI index v1.1 has no member names (wds2idx writes v1.2)");
    if (tlen != 4 || memcmp(tok, "v1.2", 4) != 0)
        return fail(-EPROTONOSUPPORT, err, errlen, "DALI index version %.*s (v1.2 is read)",
                    (int)OM_MIN(tlen, 32), tok);
    uint64_t samples;
    if (!next_token(s, slen, &at, &tok, &tlen) ||
        om_parse_uint_n(tok, tlen, OM_UINT_MAX, &samples) || samples == 0 ||
        next_token(s, slen, &at, &tok, &tlen))
        return fail(-EBADMSG, err, errlen, "line 1: a DALI index needs 'v1.2 SAMPLES'");
    if (samples > ix->lim.max_members)
        return fail(-EFBIG, err, errlen,
                    "a DALI index of %" PRIu64 " samples (at most %" PRIu64 " members)", samples,
                    ix->lim.max_members);
    struct ext_state st = {.ix = ix, .err = err, .errlen = errlen};
    int rc = 0;
    for (uint64_t i = 0; i < samples && rc == 0; i++) {
        if (!next_line(&c, &s, &slen))
            rc = fail(-EBADMSG, err, errlen, "%" PRIu64 " samples announced, %" PRIu64 " found",
                      samples, i);
        else
            rc = dali_sample(&st, s, slen, c.line);
    }
    while (rc == 0 && next_line(&c, &s, &slen))
        if (!blank(s, slen))
            rc = fail(-EBADMSG, err, errlen,
                      "line %" PRIu64 ": more samples than the %" PRIu64 " announced", c.line,
                      samples);
    return finish_ext(ix, rc, err, errlen);
}

/* ---- wids: a pickle interpreter that builds objects, calls nothing ---- */

enum pk_kind { PK_NONE, PK_BOOL, PK_INT, PK_STR, PK_BYTES, PK_LIST, PK_TUPLE, PK_GLOBAL, PK_CALL };

#define PK_NIL UINT32_MAX

struct pk_obj {
    uint8_t kind;
    int64_t i;          /* BOOL, INT */
    const char *s, *s2; /* STR, BYTES: s; GLOBAL: module s, name s2 */
    size_t len, len2;
    uint32_t *items; /* LIST, TUPLE */
    uint32_t n, cap;
    uint32_t fn, args, state; /* CALL */
    char *owned;              /* bytes decoded from latin-1 text */
};

struct pk {
    const uint8_t *p, *end;
    struct pk_obj *objs;
    uint32_t nobj, cap_obj;
    uint32_t *stack, sp, cap_stack;
    uint32_t *marks, nmarks, cap_marks;
    uint32_t *memo, nmemo, cap_memo;
    uint64_t budget; /* objects, items, memo slots and stack entries left */
    char *err;
    size_t errlen;
};

static int pk_bad(struct pk *k, const char *what)
{
    return fail(-EBADMSG, k->err, k->errlen, "wids index: %s", what);
}

/* Grow *arr (of *cap elements of size sz) to hold at least need. */
static int grow(void **arr, uint32_t *cap, uint32_t need, size_t sz)
{
    if (need <= *cap)
        return 0;
    uint64_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    if (c > UINT32_MAX - 1)
        return -ENOMEM;
    void *p = realloc(*arr, (size_t)c * sz);
    if (!p)
        return -ENOMEM;
    *arr = p;
    *cap = (uint32_t)c;
    return 0;
}

static int spend(struct pk *k)
{
    if (k->budget == 0)
        return fail(-EFBIG, k->err, k->errlen, "wids index: beyond the bounds of a shard index");
    k->budget--;
    return 0;
}

/* A new object of kind; its number in *id. */
static int pk_new(struct pk *k, uint8_t kind, uint32_t *id)
{
    int rc = spend(k);
    if (rc)
        return rc;
    if (grow((void **)&k->objs, &k->cap_obj, k->nobj + 1, sizeof(*k->objs)))
        return fail(-ENOMEM, k->err, k->errlen, "wids index: out of memory");
    *id = k->nobj++;
    k->objs[*id] = (struct pk_obj){.kind = kind, .fn = PK_NIL, .args = PK_NIL, .state = PK_NIL};
    return 0;
}

static int push(struct pk *k, uint32_t id)
{
    int rc = spend(k);
    if (rc)
        return rc;
    if (grow((void **)&k->stack, &k->cap_stack, k->sp + 1, sizeof(*k->stack)))
        return fail(-ENOMEM, k->err, k->errlen, "wids index: out of memory");
    k->stack[k->sp++] = id;
    return 0;
}

static int push_new(struct pk *k, uint8_t kind, struct pk_obj **o)
{
    uint32_t id;
    int rc = pk_new(k, kind, &id);
    if (rc)
        return rc;
    rc = push(k, id);
    *o = &k->objs[id];
    return rc;
}

static int pop(struct pk *k, uint32_t *id)
{
    if (k->sp == 0 || (k->nmarks && k->marks[k->nmarks - 1] == k->sp))
        return pk_bad(k, "stack underflow");
    *id = k->stack[--k->sp];
    return 0;
}

static int append_item(struct pk *k, uint32_t list, uint32_t item)
{
    int rc = spend(k);
    if (rc)
        return rc;
    struct pk_obj *l = &k->objs[list];
    if (grow((void **)&l->items, &l->cap, l->n + 1, sizeof(*l->items)))
        return fail(-ENOMEM, k->err, k->errlen, "wids index: out of memory");
    l->items[l->n++] = item;
    return 0;
}

/* The items above the last mark, into a new tuple or list (kind), or
 * appended to the list below the mark (kind PK_NONE). */
static int pk_collect(struct pk *k, uint8_t kind)
{
    if (!k->nmarks)
        return pk_bad(k, "no mark");
    uint32_t m = k->marks[--k->nmarks];
    uint32_t target;
    if (kind == PK_NONE) {
        if (m == 0 || k->objs[k->stack[m - 1]].kind != PK_LIST)
            return pk_bad(k, "APPENDS without a list");
        target = k->stack[m - 1];
    } else {
        int rc = pk_new(k, kind, &target);
        if (rc)
            return rc;
    }
    for (uint32_t i = m; i < k->sp; i++) {
        int rc = append_item(k, target, k->stack[i]);
        if (rc)
            return rc;
    }
    k->sp = m;
    return kind == PK_NONE ? 0 : push(k, target);
}

static int pk_tuple(struct pk *k, uint32_t n)
{
    if (k->sp < n || (k->nmarks && k->sp - n < k->marks[k->nmarks - 1]))
        return pk_bad(k, "stack underflow");
    uint32_t t;
    int rc = pk_new(k, PK_TUPLE, &t);
    for (uint32_t i = k->sp - n; i < k->sp && rc == 0; i++)
        rc = append_item(k, t, k->stack[i]);
    if (rc)
        return rc;
    k->sp -= n;
    return push(k, t);
}

static int take(struct pk *k, size_t n, const uint8_t **at)
{
    *at = k->p;
    if ((size_t)(k->end - k->p) < n)
        return pk_bad(k, "truncated");
    *at = k->p;
    k->p += n;
    return 0;
}

static uint64_t le(const uint8_t *b, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | b[i];
    return v;
}

/* A length-prefixed string or bytes: the length in lb bytes. */
static int pk_sized(struct pk *k, uint8_t kind, int lb)
{
    const uint8_t *b;
    int rc = take(k, (size_t)lb, &b);
    if (rc)
        return rc;
    uint64_t n = le(b, lb);
    if (n > (uint64_t)(k->end - k->p))
        return pk_bad(k, "truncated");
    struct pk_obj *o;
    rc = push_new(k, kind, &o);
    if (rc)
        return rc;
    o->s = (const char *)k->p;
    o->len = (size_t)n;
    k->p += n;
    return 0;
}

static int pk_int(struct pk *k, int64_t v)
{
    struct pk_obj *o;
    int rc = push_new(k, PK_INT, &o);
    if (rc == 0)
        o->i = v;
    return rc;
}

static int memo_put(struct pk *k, uint64_t idx)
{
    if (k->sp == 0 || idx > k->budget + k->nmemo)
        return pk_bad(k, "memo out of range");
    if (idx >= k->nmemo) {
        uint32_t need = (uint32_t)idx + 1;
        for (uint32_t i = k->nmemo; i < need; i++) {
            int rc = spend(k);
            if (rc)
                return rc;
        }
        if (grow((void **)&k->memo, &k->cap_memo, need, sizeof(*k->memo)))
            return fail(-ENOMEM, k->err, k->errlen, "wids index: out of memory");
        for (uint32_t i = k->nmemo; i < need; i++)
            k->memo[i] = PK_NIL;
        k->nmemo = need;
    }
    k->memo[idx] = k->stack[k->sp - 1];
    return 0;
}

static int memo_get(struct pk *k, uint64_t idx)
{
    if (idx >= k->nmemo || k->memo[idx] == PK_NIL)
        return pk_bad(k, "memo entry not set");
    return push(k, k->memo[idx]);
}

/* "module\nname\n" of GLOBAL. */
static int pk_global_text(struct pk *k)
{
    const char *s = (const char *)k->p;
    const char *nl1 = memchr(s, '\n', (size_t)(k->end - k->p));
    const char *nl2 = nl1 ? memchr(nl1 + 1, '\n', (size_t)((const char *)k->end - nl1 - 1)) : NULL;
    if (!nl2)
        return pk_bad(k, "truncated GLOBAL");
    struct pk_obj *o;
    int rc = push_new(k, PK_GLOBAL, &o);
    if (rc)
        return rc;
    o->s = s;
    o->len = (size_t)(nl1 - s);
    o->s2 = nl1 + 1;
    o->len2 = (size_t)(nl2 - nl1 - 1);
    k->p = (const uint8_t *)nl2 + 1;
    return 0;
}

static int pk_stack_global(struct pk *k)
{
    uint32_t name, mod;
    int rc = pop(k, &name);
    rc = rc ? rc : pop(k, &mod);
    if (rc)
        return rc;
    if (k->objs[name].kind != PK_STR || k->objs[mod].kind != PK_STR)
        return pk_bad(k, "STACK_GLOBAL of non-strings");
    struct pk_obj *o;
    rc = push_new(k, PK_GLOBAL, &o);
    if (rc)
        return rc;
    o->s = k->objs[mod].s;
    o->len = k->objs[mod].len;
    o->s2 = k->objs[name].s;
    o->len2 = k->objs[name].len;
    return 0;
}

/* Run the pickle to its STOP; the result in *top. */
static int pk_run(struct pk *k, uint32_t *top)
{
    for (;;) {
        const uint8_t *b = NULL;
        int rc = take(k, 1, &b);
        if (rc)
            return rc;
        uint8_t op = b[0];
        struct pk_obj *o;
        uint32_t x, y;
        switch (op) {
        case 0x80: /* PROTO */
            rc = take(k, 1, &b);
            if (rc == 0 && (b[0] < 2 || b[0] > 5))
                rc = fail(-EPROTONOSUPPORT, k->err, k->errlen,
                          "wids index: pickle protocol %u (2 to 5 are read)", b[0]);
            break;
        case 0x95: /* FRAME: a hint of the next bytes' length */
            rc = take(k, 8, &b);
            break;
        case '.': /* STOP */
            if (k->sp != 1 || k->nmarks)
                return pk_bad(k, "STOP with a stack that is not one object");
            *top = k->stack[0];
            return 0;
        case '(': /* MARK */
            rc = spend(k);
            if (rc == 0 &&
                grow((void **)&k->marks, &k->cap_marks, k->nmarks + 1, sizeof(*k->marks)))
                rc = fail(-ENOMEM, k->err, k->errlen, "wids index: out of memory");
            if (rc == 0)
                k->marks[k->nmarks++] = k->sp;
            break;
        case ']': /* EMPTY_LIST */
            rc = push_new(k, PK_LIST, &o);
            break;
        case ')': /* EMPTY_TUPLE */
            rc = push_new(k, PK_TUPLE, &o);
            break;
        case 'l': /* LIST */
            rc = pk_collect(k, PK_LIST);
            break;
        case 't': /* TUPLE */
            rc = pk_collect(k, PK_TUPLE);
            break;
        case 0x85: /* TUPLE1..3 */
        case 0x86:
        case 0x87:
            rc = pk_tuple(k, (uint32_t)(op - 0x84));
            break;
        case 'e': /* APPENDS */
            rc = pk_collect(k, PK_NONE);
            break;
        case 'a': /* APPEND */
            rc = pop(k, &x);
            if (rc == 0 && (k->sp == 0 || k->objs[k->stack[k->sp - 1]].kind != PK_LIST))
                rc = pk_bad(k, "APPEND without a list");
            if (rc == 0)
                rc = append_item(k, k->stack[k->sp - 1], x);
            break;
        case 'N':
            rc = push_new(k, PK_NONE, &o);
            break;
        case 0x88: /* NEWTRUE, NEWFALSE */
        case 0x89:
            rc = push_new(k, PK_BOOL, &o);
            if (rc == 0)
                o->i = op == 0x88;
            break;
        case 'J': /* BININT */
            rc = take(k, 4, &b);
            rc = rc ? rc : pk_int(k, (int32_t)(uint32_t)le(b, 4));
            break;
        case 'K': /* BININT1 */
            rc = take(k, 1, &b);
            rc = rc ? rc : pk_int(k, b[0]);
            break;
        case 'M': /* BININT2 */
            rc = take(k, 2, &b);
            rc = rc ? rc : pk_int(k, (int64_t)le(b, 2));
            break;
        case 0x8a: { /* LONG1: n bytes, little-endian two's complement */
            rc = take(k, 1, &b);
            uint8_t n = rc ? 0 : b[0];
            if (rc == 0 && n > 8)
                rc = pk_bad(k, "an integer over 64 bits");
            if (rc == 0)
                rc = take(k, n, &b);
            if (rc == 0) {
                uint64_t v = n ? le(b, n) : 0;
                if (n && n < 8 && (b[n - 1] & 0x80))
                    v |= UINT64_MAX << (8 * n);
                rc = pk_int(k, (int64_t)v);
            }
            break;
        }
        case 'X': /* BINUNICODE */
            rc = pk_sized(k, PK_STR, 4);
            break;
        case 0x8c: /* SHORT_BINUNICODE */
            rc = pk_sized(k, PK_STR, 1);
            break;
        case 0x8d: /* BINUNICODE8 */
            rc = pk_sized(k, PK_STR, 8);
            break;
        case 'C': /* SHORT_BINBYTES */
        case 'U': /* SHORT_BINSTRING */
            rc = pk_sized(k, PK_BYTES, 1);
            break;
        case 'B': /* BINBYTES */
        case 'T': /* BINSTRING */
            rc = pk_sized(k, PK_BYTES, 4);
            break;
        case 0x8e: /* BINBYTES8 */
        case 0x96: /* BYTEARRAY8 */
            rc = pk_sized(k, PK_BYTES, 8);
            break;
        case 'c': /* GLOBAL */
            rc = pk_global_text(k);
            break;
        case 0x93: /* STACK_GLOBAL */
            rc = pk_stack_global(k);
            break;
        case 'R': /* REDUCE: an object to be, never a call */
            rc = pop(k, &y);
            rc = rc ? rc : pop(k, &x);
            if (rc == 0 && k->objs[y].kind != PK_TUPLE)
                rc = pk_bad(k, "REDUCE without a tuple");
            if (rc == 0)
                rc = push_new(k, PK_CALL, &o);
            if (rc == 0) {
                o->fn = x;
                o->args = y;
            }
            break;
        case 'b': /* BUILD */
            rc = pop(k, &y);
            if (rc == 0 && (k->sp == 0 || k->objs[k->stack[k->sp - 1]].kind != PK_CALL ||
                            k->objs[k->stack[k->sp - 1]].state != PK_NIL))
                rc = pk_bad(k, "BUILD of something not built by REDUCE");
            if (rc == 0)
                k->objs[k->stack[k->sp - 1]].state = y;
            break;
        case 0x94: /* MEMOIZE */
            rc = memo_put(k, k->nmemo);
            break;
        case 'q': /* BINPUT */
            rc = take(k, 1, &b);
            rc = rc ? rc : memo_put(k, b[0]);
            break;
        case 'r': /* LONG_BINPUT */
            rc = take(k, 4, &b);
            rc = rc ? rc : memo_put(k, le(b, 4));
            break;
        case 'h': /* BINGET */
            rc = take(k, 1, &b);
            rc = rc ? rc : memo_get(k, b[0]);
            break;
        case 'j': /* LONG_BINGET */
            rc = take(k, 4, &b);
            rc = rc ? rc : memo_get(k, le(b, 4));
            break;
        default: {
            char what[64];
            snprintf(what, sizeof(what), "pickle opcode 0x%02x is not read", op);
            return pk_bad(k, what);
        }
        }
        if (rc)
            return rc;
    }
}

/* ---- numpy arrays among the objects ---- */

static bool is(const char *s, size_t len, const char *want)
{
    return len == strlen(want) && memcmp(s, want, len) == 0;
}

/* Is object id a GLOBAL of one of the modules and of name? */
static bool global_is(const struct pk *k, uint32_t id, const char *const *mods, const char *name)
{
    const struct pk_obj *g = &k->objs[id];
    if (g->kind != PK_GLOBAL || !is(g->s2, g->len2, name))
        return false;
    for (; *mods; mods++)
        if (is(g->s, g->len, *mods))
            return true;
    return false;
}

static const struct pk_obj *item(const struct pk *k, const struct pk_obj *t, uint32_t i,
                                 uint8_t kind)
{
    if (i >= t->n)
        return NULL;
    const struct pk_obj *o = &k->objs[t->items[i]];
    return o->kind == kind ? o : NULL;
}

struct array {
    const uint8_t *data;
    size_t len;
    uint64_t dims[2];
    int ndim;
    int itemsize;
    bool is_signed, is_float, big_endian, fortran;
};

/* numpy.dtype('i8', False, True) with its state (3, '<', ...). */
static int dtype(struct pk *k, uint32_t id, struct array *a)
{
    static const char *const numpy[] = {"numpy", NULL};
    const struct pk_obj *d = &k->objs[id];
    if (d->kind != PK_CALL || !global_is(k, d->fn, numpy, "dtype"))
        return pk_bad(k, "the array's dtype is not numpy.dtype");
    const struct pk_obj *ts = item(k, &k->objs[d->args], 0, PK_STR);
    if (!ts)
        return pk_bad(k, "numpy.dtype without a type string");
    const char *s = ts->s;
    size_t n = ts->len;
    char order = '=';
    if (n && (s[0] == '<' || s[0] == '>' || s[0] == '|' || s[0] == '=')) {
        order = s[0];
        s++, n--;
    }
    if (d->state != PK_NIL) {
        const struct pk_obj *o = item(k, &k->objs[d->state], 1, PK_STR);
        if (k->objs[d->state].kind != PK_TUPLE || !o || o->len != 1)
            return pk_bad(k, "numpy.dtype with a state of another form");
        order = o->s[0];
    }
    if (n != 2 || (s[0] != 'i' && s[0] != 'u' && s[0] != 'f') || (s[1] != '4' && s[1] != '8'))
        return pk_bad(k, "an array of another type than 32- or 64-bit integers");
    a->is_signed = s[0] == 'i';
    a->is_float = s[0] == 'f';
    a->itemsize = s[1] - '0';
    a->big_endian = order == '>';
    return 0;
}

static int shape(struct pk *k, const struct pk_obj *t, struct array *a)
{
    if (t->kind != PK_TUPLE || t->n < 1 || t->n > 2)
        return pk_bad(k, "an array of another shape than (n, 2)");
    a->ndim = (int)t->n;
    for (uint32_t i = 0; i < t->n; i++) {
        const struct pk_obj *d = item(k, t, i, PK_INT);
        if (!d || d->i < 0)
            return pk_bad(k, "an array's shape is not sizes");
        a->dims[i] = (uint64_t)d->i;
    }
    if ((a->ndim == 2 && a->dims[1] != 2) || (a->ndim == 1 && a->dims[0] != 0))
        return pk_bad(k, "an array of another shape than (n, 2)");
    return 0;
}

/* Latin-1 text (protocol 2's bytes: _codecs.encode(text, 'latin1')) to
 * bytes, kept in o->owned. */
static int latin1(struct pk *k, uint32_t id, const uint8_t **data, size_t *len)
{
    static const char *const codecs[] = {"_codecs", NULL};
    struct pk_obj *c = &k->objs[id];
    const struct pk_obj *text = c->kind == PK_CALL ? item(k, &k->objs[c->args], 0, PK_STR) : NULL;
    const struct pk_obj *enc = c->kind == PK_CALL ? item(k, &k->objs[c->args], 1, PK_STR) : NULL;
    if (!text || !enc || !global_is(k, c->fn, codecs, "encode") || !is(enc->s, enc->len, "latin1"))
        return pk_bad(k, "the array's data is not bytes");
    if (!c->owned) {
        char *out = malloc(text->len + 1);
        if (!out)
            return fail(-ENOMEM, k->err, k->errlen, "wids index: out of memory");
        size_t n = 0;
        const uint8_t *s = (const uint8_t *)text->s;
        for (size_t i = 0; i < text->len; i++) {
            if (s[i] < 0x80) {
                out[n++] = (char)s[i];
            } else if ((s[i] == 0xc2 || s[i] == 0xc3) && i + 1 < text->len &&
                       (s[i + 1] & 0xc0) == 0x80) {
                out[n++] = (char)(((s[i] & 0x03) << 6) | (s[i + 1] & 0x3f));
                i++;
            } else {
                free(out);
                return pk_bad(k, "the array's data is not latin-1");
            }
        }
        c->owned = out;
        c->len = n;
    }
    *data = (const uint8_t *)c->owned;
    *len = c->len;
    return 0;
}

static int array_data(struct pk *k, uint32_t id, struct array *a)
{
    static const char *const builtins[] = {"__builtin__", "builtins", NULL};
    const struct pk_obj *d = &k->objs[id];
    if (d->kind == PK_BYTES) {
        a->data = (const uint8_t *)d->s;
        a->len = d->len;
        return 0;
    }
    /* empty bytes in protocol 2: bytes() */
    if (d->kind == PK_CALL && global_is(k, d->fn, builtins, "bytes") && k->objs[d->args].n == 0 &&
        d->state == PK_NIL) {
        a->data = (const uint8_t *)"";
        a->len = 0;
        return 0;
    }
    return latin1(k, id, &a->data, &a->len);
}

/* The array at object id: numpy's _reconstruct with its state (protocols
 * 2-4) or _frombuffer (protocol 5). */
static int array(struct pk *k, uint32_t id, struct array *a)
{
    static const char *const multiarray[] = {"numpy.core.multiarray", "numpy._core.multiarray",
                                             NULL};
    static const char *const numeric[] = {"numpy.core.numeric", "numpy._core.numeric", NULL};
    const struct pk_obj *o = &k->objs[id];
    if (o->kind != PK_CALL)
        return pk_bad(k, "the index is not a numpy array");
    int rc;
    if (global_is(k, o->fn, multiarray, "_reconstruct")) {
        const struct pk_obj *st = o->state == PK_NIL ? NULL : &k->objs[o->state];
        if (!st || st->kind != PK_TUPLE || st->n < 4 || st->n > 5)
            return pk_bad(k, "a numpy array without its state");
        uint32_t b = st->n - 4; /* version 1 states start with it */
        const struct pk_obj *sh = &k->objs[st->items[b]];
        const struct pk_obj *f = &k->objs[st->items[b + 2]];
        if (f->kind != PK_BOOL && f->kind != PK_INT)
            return pk_bad(k, "a numpy array's order is not a flag");
        a->fortran = f->i != 0;
        rc = shape(k, sh, a);
        rc = rc ? rc : dtype(k, st->items[b + 1], a);
        rc = rc ? rc : array_data(k, st->items[b + 3], a);
        return rc;
    }
    if (global_is(k, o->fn, numeric, "_frombuffer")) {
        const struct pk_obj *args = &k->objs[o->args];
        const struct pk_obj *ord = item(k, args, 3, PK_STR);
        if (args->n != 4 || !ord || ord->len != 1 || (ord->s[0] != 'C' && ord->s[0] != 'F'))
            return pk_bad(k, "numpy _frombuffer of another form");
        a->fortran = ord->s[0] == 'F';
        rc = shape(k, &k->objs[args->items[2]], a);
        rc = rc ? rc : dtype(k, args->items[1], a);
        rc = rc ? rc : array_data(k, args->items[0], a);
        return rc;
    }
    return pk_bad(k, "the index is not a numpy array");
}

/* Element (row, col) of an (n, 2) integer array. */
static int element(struct pk *k, const struct array *a, uint64_t row, int col, uint64_t *out)
{
    uint64_t n = a->dims[0];
    uint64_t i = a->fortran ? (uint64_t)col * n + row : row * 2 + (uint64_t)col;
    const uint8_t *p = a->data + i * (uint64_t)a->itemsize;
    uint64_t v = 0;
    for (int b = 0; b < a->itemsize; b++)
        v = (v << 8) | p[a->big_endian ? b : a->itemsize - 1 - b];
    bool neg = a->is_signed && (p[a->big_endian ? 0 : a->itemsize - 1] & 0x80);
    if (neg)
        return pk_bad(k, "a negative offset or size");
    *out = v;
    return 0;
}

static void pk_free(struct pk *k)
{
    for (uint32_t i = 0; i < k->nobj; i++) {
        free(k->objs[i].items);
        free(k->objs[i].owned);
    }
    free(k->objs);
    free(k->stack);
    free(k->marks);
    free(k->memo);
}

static int wids_members(struct pk *k, uint32_t top, struct om_shard_index *ix)
{
    const struct pk_obj *t = &k->objs[top];
    const struct pk_obj *names = item(k, t, 0, PK_LIST);
    if (t->kind != PK_TUPLE || t->n != 2 || !names)
        return pk_bad(k, "not a (names, offsets) pair");
    struct array a = {0};
    int rc = array(k, t->items[1], &a);
    if (rc)
        return rc;
    uint64_t rows = a.ndim == 2 ? a.dims[0] : 0;
    if (rows != names->n)
        return pk_bad(k, "as many names as rows are needed");
    if (rows && a.is_float)
        return pk_bad(k, "an array of another type than 32- or 64-bit integers");
    if (rows > (uint64_t)SIZE_MAX / 2 / (uint64_t)a.itemsize || a.len != rows * 2 * a.itemsize)
        return pk_bad(k, "the array's data does not match its shape");
    struct ext_state st = {.ix = ix, .err = k->err, .errlen = k->errlen};
    for (uint64_t i = 0; i < rows; i++) {
        const struct pk_obj *nm = item(k, names, (uint32_t)i, PK_STR);
        if (!nm)
            return pk_bad(k, "a name is not a string");
        uint64_t off, size;
        rc = element(k, &a, i, 0, &off);
        rc = rc ? rc : element(k, &a, i, 1, &size);
        rc = rc ? rc : add_ext(&st, nm->s, nm->len, off, size);
        if (rc)
            return rc;
    }
    return 0;
}

int om_shard_wds_wids(const void *buf, size_t len, uint64_t shard_size,
                      const struct om_shard_limits *lim, struct om_shard_index *ix, char *err,
                      size_t errlen)
{
    om_shard_index_init(ix, lim, shard_size, OM_SHARD_SRC_WIDS);
    struct pk k = {
        .p = buf,
        .end = (const uint8_t *)buf + len,
        .err = err,
        .errlen = errlen,
        /* a name, a row and their bookkeeping per member, and a margin */
        .budget = 8 * ix->lim.max_members + 256,
    };
    if (len < 2 || ((const uint8_t *)buf)[0] != 0x80)
        return fail(-EBADMSG, err, errlen, "not a wids index (not a pickle)");
    uint32_t top = PK_NIL;
    int rc = pk_run(&k, &top);
    if (rc == 0 && k.p != k.end)
        rc = pk_bad(&k, "bytes after the pickle's end");
    if (rc == 0)
        rc = wids_members(&k, top, ix);
    pk_free(&k);
    return finish_ext(ix, rc, err, errlen);
}

/* ---- where the tools put them ---- */

int om_shard_wds_index_keys(const char *key, char *dali, size_t dali_len, char *wids,
                            size_t wids_len)
{
    size_t len = strlen(key);
    /* wds2idx: archive[:archive.find(".", archive.rfind("/") + 2)] + ".idx",
     * where a find that fails (-1) drops the last character */
    const char *slash = strrchr(key, '/');
    size_t start = (slash ? (size_t)(slash - key) : (size_t)-1) + 2;
    const char *dot = start < len ? strchr(key + start, '.') : NULL;
    size_t stem = dot ? (size_t)(dot - key) : (len ? len - 1 : 0);
    if (stem + 5 > dali_len || len + 7 > wids_len)
        return -ENAMETOOLONG;
    memcpy(dali, key, stem);
    memcpy(dali + stem, ".idx", 5);
    memcpy(wids, key, len);
    memcpy(wids + len, ".index", 7);
    return 0;
}
