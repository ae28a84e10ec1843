/* Digests, HMAC and encodings on OpenSSL, and XXH64 on libxxhash.
 *
 * Incremental contexts are plain structs owned by the caller;
 * om_digest_init() must be paired with om_digest_final() or om_digest_free().
 * Functions returning int give 0 or -ENOMEM / -EIO (OpenSSL failure). */
#ifndef OBJMOUNT_DIGEST_H
#define OBJMOUNT_DIGEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define OM_MD5_LEN 16
#define OM_SHA256_LEN 32
#define OM_SHA512_LEN 64
#define OM_XXH64_LEN 8  /* big-endian, as its hex is written (AIStore's "xxhash2") */
#define OM_CRC32C_LEN 4 /* big-endian (AIStore's "crc32c") */

enum om_digest_kind {
    OM_DIGEST_MD5,
    OM_DIGEST_SHA256,
    OM_DIGEST_SHA512,
    OM_DIGEST_XXH64,
    OM_DIGEST_CRC32C, /* Castagnoli, as iSCSI and AIStore compute it */
};

struct om_digest {
    void *ctx; /* EVP_MD_CTX, XXH64_state_t, or a uint32_t for OM_DIGEST_CRC32C */
    enum om_digest_kind kind;
};

/* CRC-32C (Castagnoli) of len bytes continuing from crc (0 to start),
 * with SSE4.2 when the CPU has it. */
uint32_t om_crc32c(uint32_t crc, const void *data, size_t len);

/* Bytes of a digest of kind. */
size_t om_digest_len(enum om_digest_kind kind);

int om_digest_init(struct om_digest *d, enum om_digest_kind kind);
int om_digest_update(struct om_digest *d, const void *data, size_t len);
/* Writes om_digest_len(kind) bytes to out and frees the context. */
int om_digest_final(struct om_digest *d, unsigned char *out);
void om_digest_free(struct om_digest *d);
/* The digest of what was fed so far, leaving d usable. */
int om_digest_peek(const struct om_digest *d, unsigned char *out);

int om_md5(const void *data, size_t len, unsigned char out[OM_MD5_LEN]);
int om_sha256(const void *data, size_t len, unsigned char out[OM_SHA256_LEN]);
int om_hmac_sha256(const void *key, size_t keylen, const void *data, size_t len,
                   unsigned char out[OM_SHA256_LEN]);

/* Digest of bytes [off, off+len) of fd, read with pread. Returns 0 or -errno
 * (-EIO when the file is shorter than off+len). */
int om_digest_fd_range(enum om_digest_kind kind, int fd, off_t off, uint64_t len,
                       unsigned char *out);

/* The value of one hex digit, or -1. */
int om_hexval(char c);

/* Lower-case hex of n bytes into out, which must hold 2n+1 bytes. */
void om_hex(const unsigned char *in, size_t n, char *out);
/* Parse exactly 2n hex digits. Returns 0 or -EINVAL. */
int om_unhex(const char *in, unsigned char *out, size_t n);

/* Standard base64 with padding of n bytes into out (4*ceil(n/3)+1 bytes). */
void om_base64(const unsigned char *in, size_t n, char *out);

#endif
