/* The credential chain.
 *
 * Order (first match wins):
 *   1. anonymous option: requests are not signed;
 *   2. credentials file option (refused when group/world accessible):
 *      s3fs passwd lines "KEY:SECRET" / "BUCKET:KEY:SECRET", or an AWS ini
 *      file whose [aws_profile] or [default] section is used;
 *   3. aws_profile option, from the shared credentials and config files;
 *   4. AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN);
 *   5. AIS_AUTHN_TOKEN: sent as "Authorization: Bearer" (AIStore AuthN);
 *   6. AWS_PROFILE (or "default") from AWS_SHARED_CREDENTIALS_FILE
 *      (~/.aws/credentials) and AWS_CONFIG_FILE (~/.aws/config).
 * Secrets are wiped from memory by om_creds_clear() and never logged. */
#ifndef OBJMOUNT_CREDS_H
#define OBJMOUNT_CREDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

struct om_creds {
    char *access_key;
    char *secret_key;
    char *session_token;
    char *bearer_token;
    bool anonymous;
    char *region;       /* from the profile's config section, if any */
    char *endpoint_url; /* from the profile's config section, if any */
    char source[160];   /* where they came from, for status and logs */
};

struct om_creds_options {
    bool anonymous;
    const char *credentials_file;
    const char *aws_profile;
    const char *bucket; /* selects "BUCKET:KEY:SECRET" lines */
};

/* Resolve the chain. Returns 0, -ENOENT (no credentials anywhere), -EACCES
 * (file permissions), -EINVAL (malformed file) or -ENOMEM; err gets one
 * human sentence. On failure *out is empty. */
int om_creds_resolve(const struct om_creds_options *opt, struct om_creds *out, char *err,
                     size_t errlen);

/* Parse a credentials file's text: s3fs passwd lines ("KEY:SECRET",
 * "BUCKET:KEY:SECRET" for bucket, which wins) or, when a line starts with
 * '[', the AWS ini section [profile] ("default" when NULL). Empty keys or
 * secrets count as absent. Fills out (caller clears it); 0, -EINVAL (no
 * credential in it) or -ENOMEM. Pure but for reading f. */
int om_creds_parse_stream(FILE *f, const char *bucket, const char *profile, struct om_creds *out);

/* The checks on a credentials file, made on the opened descriptor: a
 * regular file (-EINVAL), owned by uid or root (-EPERM), not readable or
 * writable by group or others (-EACCES). 0 when fine. Pure. */
int om_creds_file_check(const struct stat *st, uid_t uid);

/* Wipe and free every field. */
void om_creds_clear(struct om_creds *c);

/* Deep copy; 0 or -ENOMEM. */
int om_creds_copy(struct om_creds *dst, const struct om_creds *src);

#endif
