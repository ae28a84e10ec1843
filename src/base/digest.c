/* Digests, HMAC and encodings on OpenSSL 3. */
#include "objmount/digest.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int om_digest_init(struct om_digest *d, enum om_digest_kind kind)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx)
        return -ENOMEM;
    const EVP_MD *md = kind == OM_DIGEST_MD5 ? EVP_md5() : EVP_sha256();
    if (EVP_DigestInit_ex(ctx, md, NULL) != 1) {
        EVP_MD_CTX_free(ctx);
        return -EIO;
    }
    d->ctx = ctx;
    d->kind = kind;
    return 0;
}

int om_digest_update(struct om_digest *d, const void *data, size_t len)
{
    if (len == 0)
        return 0;
    return EVP_DigestUpdate(d->ctx, data, len) == 1 ? 0 : -EIO;
}

int om_digest_final(struct om_digest *d, unsigned char *out)
{
    unsigned int n = 0;
    int rc = EVP_DigestFinal_ex(d->ctx, out, &n) == 1 ? 0 : -EIO;
    om_digest_free(d);
    return rc;
}

int om_digest_peek(const struct om_digest *d, unsigned char *out)
{
    EVP_MD_CTX *copy = EVP_MD_CTX_new();
    if (!copy)
        return -ENOMEM;
    unsigned int n = 0;
    int rc = EVP_MD_CTX_copy_ex(copy, d->ctx) == 1 && EVP_DigestFinal_ex(copy, out, &n) == 1
                 ? 0
                 : -EIO;
    EVP_MD_CTX_free(copy);
    return rc;
}

void om_digest_free(struct om_digest *d)
{
    EVP_MD_CTX_free(d->ctx);
    d->ctx = NULL;
}

static int digest_once(enum om_digest_kind kind, const void *data, size_t len, unsigned char *out)
{
    struct om_digest d;
    int rc = om_digest_init(&d, kind);
    if (rc)
        return rc;
    rc = om_digest_update(&d, data, len);
    if (rc) {
        om_digest_free(&d);
        return rc;
    }
    return om_digest_final(&d, out);
}

int om_md5(const void *data, size_t len, unsigned char out[OM_MD5_LEN])
{
    return digest_once(OM_DIGEST_MD5, data, len, out);
}

int om_sha256(const void *data, size_t len, unsigned char out[OM_SHA256_LEN])
{
    return digest_once(OM_DIGEST_SHA256, data, len, out);
}

int om_hmac_sha256(const void *key, size_t keylen, const void *data, size_t len,
                   unsigned char out[OM_SHA256_LEN])
{
    unsigned int n = 0;
    if (!HMAC(EVP_sha256(), key, (int)keylen, data, len, out, &n))
        return -EIO;
    return 0;
}

int om_digest_fd_range(enum om_digest_kind kind, int fd, off_t off, uint64_t len,
                       unsigned char *out)
{
    enum { CHUNK = 1 << 20 };
    char *buf = malloc(CHUNK);
    if (!buf)
        return -ENOMEM;
    struct om_digest d;
    int rc = om_digest_init(&d, kind);
    if (rc) {
        free(buf);
        return rc;
    }
    while (len > 0 && rc == 0) {
        size_t want = len < CHUNK ? (size_t)len : CHUNK;
        ssize_t got = pread(fd, buf, want, off);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
        } else if (got == 0) {
            rc = -EIO;
        } else {
            rc = om_digest_update(&d, buf, (size_t)got);
            off += got;
            len -= (uint64_t)got;
        }
    }
    free(buf);
    if (rc) {
        om_digest_free(&d);
        return rc;
    }
    return om_digest_final(&d, out);
}

void om_hex(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

int om_hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int om_unhex(const char *in, unsigned char *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int hi = om_hexval(in[2 * i]);
        int lo = hi < 0 ? -1 : om_hexval(in[2 * i + 1]);
        if (lo < 0)
            return -EINVAL;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return in[2 * n] == '\0' ? 0 : -EINVAL;
}

void om_base64(const unsigned char *in, size_t n, char *out)
{
    EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}
