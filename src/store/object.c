/* What an object is, for every backend: the one table of server error
 * codes to errno, and the digests a store states of an object's content
 * (compared with what a writer wrote: pure functions). The bottom of the
 * store folder: the backends and store.c use it, it uses none of them. */
#include "objmount/store.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "objmount/util.h"

/* ---- the errno table ---- */

static const struct {
    const char *code;
    int err;
} code_table[] = {
    {"NoSuchKey", -ENOENT},
    {"NoSuchBucket", -ENOENT},
    {"NoSuchUpload", -ENOENT},
    {"NotFound", -ENOENT},
    {"AccessDenied", -EACCES},
    {"AllAccessDisabled", -EACCES},
    {"InvalidAccessKeyId", -EACCES},
    {"SignatureDoesNotMatch", -EACCES},
    {"ExpiredToken", -EACCES},
    {"InvalidToken", -EACCES},
    {"TokenRefreshRequired", -EACCES},
    {"RequestTimeTooSkewed", -EACCES},
    {"AuthorizationHeaderMalformed", -EACCES},
    {"PreconditionFailed", -ESTALE},
    {"InvalidRange", -ERANGE},
    {"EntityTooLarge", -EFBIG},
    {"EntityTooSmall", -EINVAL},
    {"KeyTooLongError", -ENAMETOOLONG},
    {"BadDigest", -EBADMSG},
    {"InvalidDigest", -EBADMSG},
    {"XAmzContentSHA256Mismatch", -EBADMSG},
    {"InvalidPart", -EBADMSG},
    {"InvalidPartOrder", -EINVAL},
    {"InvalidArgument", -EINVAL},
    {"InvalidRequest", -EINVAL},
    {"MalformedXML", -EINVAL},
    {"InvalidBucketName", -EINVAL},
    {"MissingContentLength", -EINVAL},
    {"SlowDown", -EAGAIN},
    {"ServiceUnavailable", -EAGAIN},
    {"InternalError", -EIO},
    {"RequestTimeout", -ETIMEDOUT},
    {"NotImplemented", -ENOSYS},
    {"MethodNotAllowed", -ENOTSUP},
    {"QuotaExceeded", -EDQUOT},
    {"BucketAlreadyExists", -EEXIST},
    /* a file `a` and a key `a/b` at once, on stores that keep objects as
     * files (versitygw, MinIO; AIStore's ErrMv) */
    {"ObjectParentIsFile", -ENOTDIR},
    {"ExistingObjectIsDirectory", -EEXIST},
    {"DirectoryObjectContainsData", -EEXIST},
    {"ErrMv", -ENOTDIR},
    {"ErrMvDir", -EEXIST}, /* ais.c: ErrMv whose message says the name is a directory */
    {"BucketAlreadyOwnedByYou", -EEXIST},
    {"PermanentRedirect", -EREMOTE},
    {"TemporaryRedirect", -EREMOTE},
};

int om_store_errno(long status, const char *code)
{
    if (code && *code) {
        for (size_t i = 0; i < OM_ARRAY_LEN(code_table); i++) {
            if (strcmp(code, code_table[i].code) == 0)
                return code_table[i].err;
        }
    }
    switch (status) {
    case 400:
        return -EINVAL;
    case 401:
    case 403:
        return -EACCES;
    case 404:
        return -ENOENT;
    case 405:
        return -ENOTSUP;
    case 409:
        return -EBUSY;
    case 412:
        return -ESTALE;
    case 416:
        return -ERANGE;
    case 429:
    case 503:
        return -EAGAIN;
    case 501:
        return -ENOSYS;
    case 301:
    case 302:
    case 307:
    case 308:
        return -EREMOTE;
    default:
        return -EIO;
    }
}

/* ---- names ---- */

bool om_region_valid(const char *region)
{
    if (!region || !*region)
        return false;
    for (const char *c = region; *c; c++) {
        if (!(islower((unsigned char)*c) || isdigit((unsigned char)*c) || *c == '-'))
            return false;
    }
    return true;
}

/* ---- digests ---- */

const char *om_sum_type_name(enum om_sum_type t)
{
    switch (t) {
    case OM_SUM_MD5:
        return "MD5";
    case OM_SUM_MD5_PARTS:
        return "MD5 of parts";
    case OM_SUM_XXH64:
        return "xxhash64";
    case OM_SUM_SHA256:
        return "SHA-256";
    case OM_SUM_SHA512:
        return "SHA-512";
    case OM_SUM_CRC32C:
        return "CRC-32C";
    case OM_SUM_NONE:
        break;
    }
    return "none";
}

void om_sum_of_parts(const unsigned char (*part_md5)[OM_MD5_LEN], int n, struct om_sum *out)
{
    memset(out, 0, sizeof(*out));
    struct om_digest d;
    unsigned char sum[OM_MD5_LEN];
    if (n <= 0 || om_digest_init(&d, OM_DIGEST_MD5))
        return;
    for (int i = 0; i < n; i++)
        om_digest_update(&d, part_md5[i], OM_MD5_LEN);
    if (om_digest_final(&d, sum))
        return;
    out->type = OM_SUM_MD5_PARTS;
    out->firm = true;
    out->parts = n;
    om_hex(sum, OM_MD5_LEN, out->hex);
}

static bool hex_is(const char *hex, const unsigned char *bytes, size_t n)
{
    char want[2 * OM_SHA512_LEN + 1];
    om_hex(bytes, n, want);
    return strcasecmp(hex, want) == 0;
}

bool om_sum_from_ais(const char *type, const char *value, struct om_sum *out)
{
    static const struct {
        const char *name;
        enum om_sum_type type;
        size_t hexlen;
    } types[] = {
        {"xxhash2", OM_SUM_XXH64, 2 * OM_XXH64_LEN}, {"xxhash", OM_SUM_XXH64, 2 * OM_XXH64_LEN},
        {"md5", OM_SUM_MD5, 2 * OM_MD5_LEN},         {"sha256", OM_SUM_SHA256, 2 * OM_SHA256_LEN},
        {"sha512", OM_SUM_SHA512, 2 * OM_SHA512_LEN}, {"crc32c", OM_SUM_CRC32C, 2 * OM_CRC32C_LEN},
    };
    memset(out, 0, sizeof(*out));
    if (!type || !value)
        return false;
    for (size_t i = 0; i < OM_ARRAY_LEN(types); i++) {
        if (strcmp(type, types[i].name) != 0)
            continue;
        size_t n = strlen(value);
        if (n != types[i].hexlen)
            return false;
        for (size_t k = 0; k < n; k++) {
            if (om_hexval(value[k]) < 0)
                return false;
            out->hex[k] = (char)tolower((unsigned char)value[k]);
        }
        out->hex[n] = '\0';
        out->type = types[i].type;
        out->firm = true;
        return true;
    }
    return false;
}

bool om_sum_digest_kind(enum om_sum_type t, enum om_digest_kind *kind)
{
    switch (t) {
    case OM_SUM_MD5:
        *kind = OM_DIGEST_MD5;
        return true;
    case OM_SUM_XXH64:
        *kind = OM_DIGEST_XXH64;
        return true;
    case OM_SUM_SHA256:
        *kind = OM_DIGEST_SHA256;
        return true;
    case OM_SUM_SHA512:
        *kind = OM_DIGEST_SHA512;
        return true;
    case OM_SUM_CRC32C:
        *kind = OM_DIGEST_CRC32C;
        return true;
    default:
        return false;
    }
}

void om_local_sums_set(struct om_local_sums *have, enum om_digest_kind kind,
                       const unsigned char *digest)
{
    switch (kind) {
    case OM_DIGEST_MD5:
        memcpy(have->md5, digest, OM_MD5_LEN);
        have->have_md5 = true;
        break;
    case OM_DIGEST_XXH64:
        memcpy(have->xxh64, digest, OM_XXH64_LEN);
        have->have_xxh64 = true;
        break;
    case OM_DIGEST_SHA256:
        memcpy(have->sha256, digest, OM_SHA256_LEN);
        have->have_sha256 = true;
        break;
    case OM_DIGEST_SHA512:
        memcpy(have->sha512, digest, OM_SHA512_LEN);
        have->have_sha512 = true;
        break;
    case OM_DIGEST_CRC32C:
        memcpy(have->crc32c, digest, OM_CRC32C_LEN);
        have->have_crc32c = true;
        break;
    }
}

enum om_proof om_sum_check(const struct om_sum *stated, const struct om_local_sums *have)
{
    bool have_it, match;
    switch (stated->type) {
    case OM_SUM_MD5:
        have_it = have->have_md5;
        match = have_it && hex_is(stated->hex, have->md5, OM_MD5_LEN);
        break;
    case OM_SUM_MD5_PARTS:
        /* only the same parts make the same digest */
        have_it = have->have_parts && have->nparts == stated->parts;
        match = have_it && hex_is(stated->hex, have->parts_md5, OM_MD5_LEN);
        if (!have_it && have->have_parts)
            return OM_PROOF_NONE; /* another cut into parts: nothing to compare */
        break;
    case OM_SUM_XXH64:
        have_it = have->have_xxh64;
        match = have_it && hex_is(stated->hex, have->xxh64, OM_XXH64_LEN);
        break;
    case OM_SUM_SHA256:
        have_it = have->have_sha256;
        match = have_it && hex_is(stated->hex, have->sha256, OM_SHA256_LEN);
        break;
    case OM_SUM_SHA512:
        have_it = have->have_sha512;
        match = have_it && hex_is(stated->hex, have->sha512, OM_SHA512_LEN);
        break;
    case OM_SUM_CRC32C:
        have_it = have->have_crc32c;
        match = have_it && hex_is(stated->hex, have->crc32c, OM_CRC32C_LEN);
        break;
    default:
        return OM_PROOF_NONE;
    }
    if (!have_it)
        return OM_PROOF_MISSING;
    if (match)
        return OM_PROOF_MATCH;
    return stated->firm ? OM_PROOF_MISMATCH : OM_PROOF_NONE;
}
