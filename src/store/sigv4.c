/* AWS Signature Version 4 (header form) for S3. */
#include "objmount/sigv4.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objmount/digest.h"
#include "objmount/url.h"

struct kv {
    char *name;
    char *value;
};

static int kv_cmp(const void *a, const void *b)
{
    const struct kv *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->value, y->value);
}

static void kv_free(struct kv *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].name);
        free(v[i].value);
    }
    free(v);
}

/* Decode one query component then encode it per SigV4. */
static char *requote(const char *s, size_t len)
{
    struct om_buf dec = {0}, enc = {0};
    if (om_uri_decode(&dec, s, len) || om_uri_encode(&enc, dec.data ? dec.data : "", dec.len, false)) {
        om_buf_free(&dec);
        om_buf_free(&enc);
        return NULL;
    }
    om_buf_free(&dec);
    return om_buf_steal(&enc);
}

int om_sigv4_canonical_query(const char *query, struct om_buf *out)
{
    if (!query || !*query)
        return 0;
    size_t n = 1;
    for (const char *p = query; *p; p++)
        n += *p == '&';
    struct kv *v = calloc(n, sizeof(*v));
    if (!v)
        return -ENOMEM;
    size_t count = 0;
    int rc = 0;
    const char *p = query;
    while (*p) {
        size_t len = strcspn(p, "&");
        if (len > 0) {
            const char *eq = memchr(p, '=', len);
            size_t nlen = eq ? (size_t)(eq - p) : len;
            v[count].name = requote(p, nlen);
            v[count].value = eq ? requote(eq + 1, len - nlen - 1) : strdup("");
            count++;
            if (!v[count - 1].name || !v[count - 1].value) {
                rc = -ENOMEM;
                break;
            }
        }
        p += len;
        if (*p == '&')
            p++;
    }
    if (rc == 0) {
        qsort(v, count, sizeof(*v), kv_cmp);
        for (size_t i = 0; i < count && rc == 0; i++)
            rc = om_buf_printf(out, "%s%s=%s", i ? "&" : "", v[i].name, v[i].value);
    }
    kv_free(v, count);
    return rc;
}

/* Lower-case name, value trimmed with inner runs of spaces collapsed. */
static int canon_header(const char *name, const char *value, struct kv *out)
{
    out->name = strdup(name);
    size_t vlen = strlen(value);
    out->value = malloc(vlen + 1);
    if (!out->name || !out->value)
        return -ENOMEM;
    for (char *c = out->name; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    size_t j = 0;
    bool space = false;
    for (const char *c = value; *c; c++) {
        if (*c == ' ' || *c == '\t') {
            space = j > 0;
            continue;
        }
        if (space)
            out->value[j++] = ' ';
        space = false;
        out->value[j++] = *c;
    }
    out->value[j] = '\0';
    return 0;
}

/* Builds the sorted canonical header list; *signed_names gets "a;b;c". */
static int canon_headers(const struct om_sigv4_input *in, const char *amz_date,
                         const char *session_token, struct kv **out, size_t *count)
{
    size_t n = in->nheaders + 4;
    struct kv *v = calloc(n, sizeof(*v));
    if (!v)
        return -ENOMEM;
    size_t k = 0;
    int rc = canon_header("host", in->host, &v[k++]);
    if (!rc)
        rc = canon_header("x-amz-content-sha256", in->payload_hash, &v[k++]);
    if (!rc)
        rc = canon_header("x-amz-date", amz_date, &v[k++]);
    if (!rc && session_token)
        rc = canon_header("x-amz-security-token", session_token, &v[k++]);
    for (size_t i = 0; i < in->nheaders && !rc; i++)
        rc = canon_header(in->headers[i].name, in->headers[i].value, &v[k++]);
    if (rc) {
        kv_free(v, k);
        return rc;
    }
    qsort(v, k, sizeof(*v), kv_cmp);
    *out = v;
    *count = k;
    return 0;
}

static int build_canonical(const struct om_sigv4_input *in, const char *amz_date,
                           const char *session_token, struct om_buf *out,
                           struct om_buf *signed_names)
{
    struct kv *h = NULL;
    size_t nh = 0;
    int rc = canon_headers(in, amz_date, session_token, &h, &nh);
    if (rc)
        return rc;
    rc = om_buf_printf(out, "%s\n%s\n", in->method, in->path);
    if (!rc)
        rc = om_sigv4_canonical_query(in->query, out);
    if (!rc)
        rc = om_buf_puts(out, "\n");
    for (size_t i = 0; i < nh && !rc; i++)
        rc = om_buf_printf(out, "%s:%s\n", h[i].name, h[i].value);
    if (!rc)
        rc = om_buf_puts(out, "\n");
    for (size_t i = 0; i < nh && !rc; i++)
        rc = om_buf_printf(signed_names, "%s%s", i ? ";" : "", h[i].name);
    if (!rc)
        rc = om_buf_printf(out, "%s\n%s", signed_names->data, in->payload_hash);
    kv_free(h, nh);
    return rc;
}

static void format_amz_date(time_t now, char out[17])
{
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

int om_sigv4_canonical_request(const struct om_sigv4_input *in, const char *amz_date,
                               const char *session_token, struct om_buf *out)
{
    struct om_buf names = {0};
    int rc = build_canonical(in, amz_date, session_token, out, &names);
    om_buf_free(&names);
    return rc;
}

int om_sigv4_sign(const struct om_sigv4_input *in, const char *access_key, const char *secret_key,
                  const char *session_token, struct om_sigv4_output *out)
{
    memset(out, 0, sizeof(*out));
    if (!in->method || !in->host || !in->path || !in->payload_hash || !in->region ||
        !in->service || !access_key || !secret_key)
        return -EINVAL;
    format_amz_date(in->now, out->amz_date);
    char day[9];
    memcpy(day, out->amz_date, 8);
    day[8] = '\0';

    struct om_buf canon = {0}, names = {0}, sts = {0}, key = {0};
    unsigned char hash[OM_SHA256_LEN], k[OM_SHA256_LEN];
    char hex[2 * OM_SHA256_LEN + 1];
    int rc = build_canonical(in, out->amz_date, session_token, &canon, &names);
    if (!rc)
        rc = om_sha256(canon.data, canon.len, hash);
    if (!rc) {
        om_hex(hash, sizeof(hash), hex);
        rc = om_buf_printf(&sts, "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s", out->amz_date,
                           day, in->region, in->service, hex);
    }
    /* kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, day), region), service), "aws4_request") */
    if (!rc)
        rc = om_buf_printf(&key, "AWS4%s", secret_key);
    if (!rc)
        rc = om_hmac_sha256(key.data, key.len, day, strlen(day), k);
    if (!rc)
        rc = om_hmac_sha256(k, sizeof(k), in->region, strlen(in->region), k);
    if (!rc)
        rc = om_hmac_sha256(k, sizeof(k), in->service, strlen(in->service), k);
    if (!rc)
        rc = om_hmac_sha256(k, sizeof(k), "aws4_request", 12, k);
    if (!rc)
        rc = om_hmac_sha256(k, sizeof(k), sts.data, sts.len, hash);
    if (!rc) {
        om_hex(hash, sizeof(hash), out->signature);
        if (asprintf(&out->authorization,
                     "AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request,SignedHeaders=%s,"
                     "Signature=%s",
                     access_key, day, in->region, in->service, names.data,
                     out->signature) < 0) {
            out->authorization = NULL;
            rc = -ENOMEM;
        }
    }
    if (key.data)
        memset(key.data, 0, key.len);
    memset(k, 0, sizeof(k));
    om_buf_free(&canon);
    om_buf_free(&names);
    om_buf_free(&sts);
    om_buf_free(&key);
    return rc;
}
