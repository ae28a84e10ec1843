/* A small JSON writer: escaping and nesting, nothing more. */
#include "objmount/json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s, or 0. */
static size_t utf8_len(const unsigned char *s)
{
    size_t n;
    unsigned min;
    unsigned cp;
    if (s[0] < 0x80)
        return 1;
    if ((s[0] & 0xe0) == 0xc0)
        n = 2, min = 0x80, cp = s[0] & 0x1f;
    else if ((s[0] & 0xf0) == 0xe0)
        n = 3, min = 0x800, cp = s[0] & 0x0f;
    else if ((s[0] & 0xf8) == 0xf0)
        n = 4, min = 0x10000, cp = s[0] & 0x07;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

int om_json_escape(struct om_buf *b, const char *s)
{
    int rc = om_buf_append(b, "\"", 1);
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (!rc && *p) {
        const unsigned char *run = p;
        size_t n;
        while (*p >= 0x20 && *p != '"' && *p != '\\' && (n = utf8_len(p)) != 0)
            p += n;
        if (p > run)
            rc = om_buf_append(b, run, (size_t)(p - run));
        if (rc || !*p)
            break;
        switch (*p) {
        case '"':
            rc = om_buf_puts(b, "\\\"");
            break;
        case '\\':
            rc = om_buf_puts(b, "\\\\");
            break;
        case '\n':
            rc = om_buf_puts(b, "\\n");
            break;
        case '\r':
            rc = om_buf_puts(b, "\\r");
            break;
        case '\t':
            rc = om_buf_puts(b, "\\t");
            break;
        default:
            if (*p < 0x20)
                rc = om_buf_printf(b, "\\u%04x", *p);
            else
                rc = om_buf_puts(b, "\\ufffd"); /* not UTF-8 */
        }
        p++;
    }
    return rc ? rc : om_buf_append(b, "\"", 1);
}

void om_json_init(struct om_json *j, struct om_buf *b)
{
    memset(j, 0, sizeof(*j));
    j->b = b;
}

/* The comma and the member name before a value. */
static bool member(struct om_json *j, const char *key)
{
    if (j->rc)
        return false;
    if (j->has_item[j->depth])
        j->rc = om_buf_append(j->b, ",", 1);
    j->has_item[j->depth] = true;
    if (!j->rc && key) {
        j->rc = om_json_escape(j->b, key);
        if (!j->rc)
            j->rc = om_buf_append(j->b, ":", 1);
    }
    return j->rc == 0;
}

static void open_(struct om_json *j, const char *key, const char *open)
{
    if (!member(j, key))
        return;
    if (j->depth >= OM_JSON_MAX_DEPTH) {
        j->rc = -EINVAL;
        return;
    }
    j->rc = om_buf_puts(j->b, open);
    j->has_item[++j->depth] = false;
}

void om_json_object(struct om_json *j, const char *key)
{
    open_(j, key, "{");
}

void om_json_array(struct om_json *j, const char *key)
{
    open_(j, key, "[");
}

void om_json_end(struct om_json *j, char close)
{
    if (j->rc)
        return;
    if (j->depth == 0) {
        j->rc = -EINVAL;
        return;
    }
    j->depth--;
    j->rc = om_buf_append(j->b, &close, 1);
}

void om_json_str(struct om_json *j, const char *key, const char *v)
{
    if (member(j, key))
        j->rc = v ? om_json_escape(j->b, v) : om_buf_puts(j->b, "null");
}

void om_json_u64(struct om_json *j, const char *key, uint64_t v)
{
    if (member(j, key))
        j->rc = om_buf_printf(j->b, "%" PRIu64, v);
}

void om_json_i64(struct om_json *j, const char *key, int64_t v)
{
    if (member(j, key))
        j->rc = om_buf_printf(j->b, "%" PRId64, v);
}

void om_json_double(struct om_json *j, const char *key, double v)
{
    if (member(j, key))
        j->rc = isfinite(v) ? om_buf_printf(j->b, "%.6g", v) : om_buf_puts(j->b, "null");
}

void om_json_bool(struct om_json *j, const char *key, bool v)
{
    if (member(j, key))
        j->rc = om_buf_puts(j->b, v ? "true" : "false");
}

void om_json_raw(struct om_json *j, const char *key, const char *json)
{
    if (member(j, key))
        j->rc = om_buf_puts(j->b, json);
}
