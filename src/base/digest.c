/* Digests, HMAC and encodings on OpenSSL 3; XXH64 on libxxhash. */
#include "objmount/digest.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

/* ---- CRC32C ---- */

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
    }
}

static uint32_t crc_soft(uint32_t c, const unsigned char *p, size_t n)
{
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        v ^= c;
        c = crc_table[7][v & 0xff] ^ crc_table[6][(v >> 8) & 0xff] ^
            crc_table[5][(v >> 16) & 0xff] ^ crc_table[4][(v >> 24) & 0xff] ^
            crc_table[3][(v >> 32) & 0xff] ^ crc_table[2][(v >> 40) & 0xff] ^
            crc_table[1][(v >> 48) & 0xff] ^ crc_table[0][v >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
    return c;
}

/* a * b modulo the CRC32C polynomial, bits reflected (as the register):
 * what shifting a CRC over zero bytes does (zlib's multmodp) */
static uint32_t crc_multmodp(uint32_t a, uint32_t b)
{
    uint32_t m = 1u << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0)
                break;
        }
        m >>= 1;
        b = b & 1 ? (b >> 1) ^ 0x82F63B78u : b >> 1;
    }
    return p;
}

#if defined(__x86_64__)
#define CRC_LANE 4096 /* bytes of each of the three interleaved streams */
static uint32_t crc_lane_shift; /* x^(8 * CRC_LANE) mod P */
static pthread_once_t crc_shift_once = PTHREAD_ONCE_INIT;

static void crc_shift_init(void)
{
    uint32_t x8n = 1u << 31; /* x^0 */
    uint32_t sq = 1u << 30;  /* x^1, squared along the bits of 8 * CRC_LANE */
    for (uint64_t n = 8 * (uint64_t)CRC_LANE; n; n >>= 1) {
        if (n & 1)
            x8n = crc_multmodp(sq, x8n);
        sq = crc_multmodp(sq, sq);
    }
    crc_lane_shift = x8n;
}

/* The crc32 instruction takes 3 cycles and can start one every cycle:
 * three independent streams over consecutive lanes keep it busy (about 3x
 * one stream), then the lanes' CRCs are joined by shifting (a CRC over
 * A then B is CRC(A) shifted over |B| zero bytes, xor CRC(B) from 0). */
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const unsigned char *p,
                                                          size_t n)
{
    uint64_t c64 = c;
    if (n >= 3 * CRC_LANE) {
        pthread_once(&crc_shift_once, crc_shift_init);
        while (n >= 3 * CRC_LANE) {
            uint64_t c1 = 0, c2 = 0;
            for (size_t i = 0; i < CRC_LANE; i += 8) {
                uint64_t v0, v1, v2;
                memcpy(&v0, p + i, 8);
                memcpy(&v1, p + CRC_LANE + i, 8);
                memcpy(&v2, p + 2 * CRC_LANE + i, 8);
                c64 = __builtin_ia32_crc32di(c64, v0);
                c1 = __builtin_ia32_crc32di(c1, v1);
                c2 = __builtin_ia32_crc32di(c2, v2);
            }
            uint32_t j = crc_multmodp(crc_lane_shift, (uint32_t)c64) ^ (uint32_t)c1;
            c64 = crc_multmodp(crc_lane_shift, j) ^ (uint32_t)c2;
            p += 3 * CRC_LANE;
            n -= 3 * CRC_LANE;
        }
    }
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = __builtin_ia32_crc32di(c64, v);
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n--)
        c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}
#endif

uint32_t om_crc32c(uint32_t crc, const void *data, size_t len)
{
    uint32_t c = ~crc;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2"))
        return ~crc_hw(c, data, len);
#endif
    pthread_once(&crc_once, crc_init);
    return ~crc_soft(c, data, len);
}

size_t om_digest_len(enum om_digest_kind kind)
{
    switch (kind) {
    case OM_DIGEST_CRC32C:
        return OM_CRC32C_LEN;
    case OM_DIGEST_MD5:
        return OM_MD5_LEN;
    case OM_DIGEST_SHA256:
        return OM_SHA256_LEN;
    case OM_DIGEST_SHA512:
        return OM_SHA512_LEN;
    case OM_DIGEST_XXH64:
        return OM_XXH64_LEN;
    }
    return 0;
}

int om_digest_init(struct om_digest *d, enum om_digest_kind kind)
{
    d->kind = kind;
    if (kind == OM_DIGEST_CRC32C) {
        uint32_t *c = calloc(1, sizeof(*c));
        if (!c)
            return -ENOMEM;
        d->ctx = c;
        return 0;
    }
    if (kind == OM_DIGEST_XXH64) {
        XXH64_state_t *x = XXH64_createState();
        if (!x)
            return -ENOMEM;
        XXH64_reset(x, 0);
        d->ctx = x;
        return 0;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx)
        return -ENOMEM;
    const EVP_MD *md = kind == OM_DIGEST_MD5      ? EVP_md5()
                       : kind == OM_DIGEST_SHA512 ? EVP_sha512()
                                                  : EVP_sha256();
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
    if (d->kind == OM_DIGEST_XXH64)
        return XXH64_update(d->ctx, data, len) == XXH_OK ? 0 : -EIO;
    if (d->kind == OM_DIGEST_CRC32C) {
        uint32_t *c = d->ctx;
        *c = om_crc32c(*c, data, len);
        return 0;
    }
    return EVP_DigestUpdate(d->ctx, data, len) == 1 ? 0 : -EIO;
}

static void xxh64_out(const XXH64_state_t *x, unsigned char *out)
{
    XXH64_canonical_t c;
    XXH64_canonicalFromHash(&c, XXH64_digest(x));
    memcpy(out, c.digest, OM_XXH64_LEN);
}

static void crc_out(const uint32_t *c, unsigned char *out)
{
    out[0] = (unsigned char)(*c >> 24);
    out[1] = (unsigned char)(*c >> 16);
    out[2] = (unsigned char)(*c >> 8);
    out[3] = (unsigned char)*c;
}

int om_digest_final(struct om_digest *d, unsigned char *out)
{
    int rc = 0;
    if (d->kind == OM_DIGEST_CRC32C) {
        crc_out(d->ctx, out);
    } else if (d->kind == OM_DIGEST_XXH64) {
        xxh64_out(d->ctx, out);
    } else {
        unsigned int n = 0;
        rc = EVP_DigestFinal_ex(d->ctx, out, &n) == 1 ? 0 : -EIO;
    }
    om_digest_free(d);
    return rc;
}

int om_digest_peek(const struct om_digest *d, unsigned char *out)
{
    if (d->kind == OM_DIGEST_CRC32C) {
        crc_out(d->ctx, out);
        return 0;
    }
    if (d->kind == OM_DIGEST_XXH64) {
        xxh64_out(d->ctx, out);
        return 0;
    }
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
    if (d->kind == OM_DIGEST_XXH64)
        XXH64_freeState(d->ctx);
    else if (d->kind == OM_DIGEST_CRC32C)
        free(d->ctx);
    else
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
