/* The credential chain: options, environment, shared AWS files, AIStore token. */
#include "objmount/creds.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "objmount/util.h"

static void wipe_free(char **p)
{
    if (*p) {
        memset(*p, 0, strlen(*p));
        free(*p);
        *p = NULL;
    }
}

void om_creds_clear(struct om_creds *c)
{
    wipe_free(&c->access_key);
    wipe_free(&c->secret_key);
    wipe_free(&c->session_token);
    wipe_free(&c->bearer_token);
    free(c->region);
    free(c->endpoint_url);
    memset(c, 0, sizeof(*c));
}

static int dup_field(char **dst, const char *src)
{
    if (!src) {
        *dst = NULL;
        return 0;
    }
    *dst = strdup(src);
    return *dst ? 0 : -ENOMEM;
}

int om_creds_copy(struct om_creds *dst, const struct om_creds *src)
{
    memset(dst, 0, sizeof(*dst));
    dst->anonymous = src->anonymous;
    memcpy(dst->source, src->source, sizeof(dst->source));
    if (dup_field(&dst->access_key, src->access_key) ||
        dup_field(&dst->secret_key, src->secret_key) ||
        dup_field(&dst->session_token, src->session_token) ||
        dup_field(&dst->bearer_token, src->bearer_token) || dup_field(&dst->region, src->region) ||
        dup_field(&dst->endpoint_url, src->endpoint_url)) {
        om_creds_clear(dst);
        return -ENOMEM;
    }
    return 0;
}

static const char *env_nonempty(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static char *home_file(const char *rel)
{
    const char *home = env_nonempty("HOME");
    if (!home) {
        struct passwd *pw = getpwuid(getuid());
        home = pw ? pw->pw_dir : NULL;
    }
    if (!home)
        return NULL;
    char *p = NULL;
    return asprintf(&p, "%s/%s", home, rel) < 0 ? NULL : p;
}

/* Looks up key in [section] of an ini file. Returns a malloc'd value,
 * NULL when absent; *found_section tells whether the section exists. */
struct ini_hit {
    char *access_key, *secret_key, *session_token, *region, *endpoint_url;
    bool section_found;
};

static void ini_hit_clear(struct ini_hit *h)
{
    wipe_free(&h->access_key);
    wipe_free(&h->secret_key);
    wipe_free(&h->session_token);
    free(h->region);
    free(h->endpoint_url);
    memset(h, 0, sizeof(*h));
}

/* Reads [section] (or [profile section] when config_style) of path.
 * Returns 0 (file read; hit may be empty), -ENOENT (no file) or -ENOMEM. */
static int ini_read_stream(FILE *f, const char *section, bool config_style, struct ini_hit *hit)
{
    char *line = NULL;
    size_t cap = 0;
    bool in = false;
    int rc = 0;
    while (getline(&line, &cap, f) > 0 && rc == 0) {
        char *s = om_str_trim(line);
        if (*s == '#' || *s == ';' || *s == '\0')
            continue;
        if (*s == '[') {
            char *end = strchr(s, ']');
            if (!end)
                continue;
            *end = '\0';
            char *name = om_str_trim(s + 1);
            if (config_style && strcmp(section, "default") != 0) {
                const char *rest = om_str_skip_prefix_ci(name, "profile ");
                in = rest && strcmp(om_str_trim((char *)rest), section) == 0;
            } else {
                in = strcmp(name, section) == 0;
            }
            hit->section_found |= in;
            continue;
        }
        if (!in)
            continue;
        char *eq = strchr(s, '=');
        if (!eq)
            continue;
        *eq = '\0';
        char *key = om_str_trim(s), *val = om_str_trim(eq + 1);
        char **dst = NULL;
        if (strcmp(key, "aws_access_key_id") == 0)
            dst = &hit->access_key;
        else if (strcmp(key, "aws_secret_access_key") == 0)
            dst = &hit->secret_key;
        else if (strcmp(key, "aws_session_token") == 0)
            dst = &hit->session_token;
        else if (strcmp(key, "region") == 0)
            dst = &hit->region;
        else if (strcmp(key, "endpoint_url") == 0)
            dst = &hit->endpoint_url;
        if (dst) {
            wipe_free(dst);
            if (*val && !(*dst = strdup(val))) /* an empty value is no value */
                rc = -ENOMEM;
        }
    }
    if (line) {
        memset(line, 0, cap);
        free(line);
    }
    return rc;
}

static int ini_read(const char *path, const char *section, bool config_style, struct ini_hit *hit)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -ENOENT;
    int rc = ini_read_stream(f, section, config_style, hit);
    fclose(f);
    return rc;
}

static void take(char **dst, char **src)
{
    if (*src && !*dst) {
        *dst = *src;
        *src = NULL;
    }
}

/* The profile from the shared files. -ENOENT when neither has the profile
 * with keys. */
static int from_profile(const char *profile, struct om_creds *out, char *err, size_t errlen)
{
    const char *credpath_env = env_nonempty("AWS_SHARED_CREDENTIALS_FILE");
    const char *confpath_env = env_nonempty("AWS_CONFIG_FILE");
    char *credpath = credpath_env ? strdup(credpath_env) : home_file(".aws/credentials");
    char *confpath = confpath_env ? strdup(confpath_env) : home_file(".aws/config");
    struct ini_hit c = {0}, k = {0};
    int rc = 0;
    if (credpath && ini_read(credpath, profile, false, &c) == -ENOMEM)
        rc = -ENOMEM;
    if (!rc && confpath && ini_read(confpath, profile, true, &k) == -ENOMEM)
        rc = -ENOMEM;
    if (!rc) {
        take(&out->access_key, &c.access_key);
        take(&out->secret_key, &c.secret_key);
        take(&out->session_token, &c.session_token);
        take(&out->access_key, &k.access_key);
        take(&out->secret_key, &k.secret_key);
        take(&out->session_token, &k.session_token);
        take(&out->region, &k.region);
        take(&out->region, &c.region);
        take(&out->endpoint_url, &k.endpoint_url);
        take(&out->endpoint_url, &c.endpoint_url);
        if (!out->access_key || !out->secret_key) {
            snprintf(err, errlen, "profile '%s' has no aws_access_key_id/aws_secret_access_key in %s or %s",
                     profile, credpath ? credpath : "~/.aws/credentials",
                     confpath ? confpath : "~/.aws/config");
            rc = (c.section_found || k.section_found) ? -EINVAL : -ENOENT;
        } else {
            snprintf(out->source, sizeof(out->source), "profile %s (%s)", profile,
                     c.section_found ? credpath : confpath);
        }
    }
    ini_hit_clear(&c);
    ini_hit_clear(&k);
    free(credpath);
    free(confpath);
    return rc;
}

int om_creds_parse_stream(FILE *f, const char *bucket, const char *profile, struct om_creds *out)
{
    char *line = NULL;
    size_t cap = 0;
    bool ini = false;
    int rc = -EINVAL;
    while (getline(&line, &cap, f) > 0) {
        char *s = om_str_trim(line);
        if (*s == '#' || *s == '\0')
            continue;
        if (*s == '[') {
            ini = true;
            break;
        }
        /* s3fs's other form, for keys with a colon (Swift's "test:tester"):
         * AWSAccessKeyId=KEY and AWSSecretKey=SECRET on two lines */
        char **slot = NULL;
        if (strncmp(s, "AWSAccessKeyId=", 15) == 0)
            slot = &out->access_key, s += 15;
        else if (strncmp(s, "AWSSecretKey=", 13) == 0)
            slot = &out->secret_key, s += 13;
        if (slot) {
            wipe_free(slot);
            *slot = strdup(s);
            bool both = out->access_key && *out->access_key && out->secret_key &&
                        *out->secret_key; /* an empty value is no key */
            rc = !*slot ? -ENOMEM : both ? 0 : -EINVAL;
            continue;
        }
        /* "KEY:SECRET" or "BUCKET:KEY:SECRET" */
        char *c1 = strchr(s, ':');
        if (!c1)
            continue;
        char *c2 = strchr(c1 + 1, ':');
        char *key, *secret;
        if (c2) {
            *c1 = '\0';
            if (!bucket || strcmp(s, bucket) != 0)
                continue;
            key = c1 + 1;
            *c2 = '\0';
            secret = c2 + 1;
        } else {
            *c1 = '\0';
            key = s;
            secret = c1 + 1;
        }
        if (!*key || !*secret)
            continue; /* an empty key or secret is no credential */
        wipe_free(&out->access_key);
        wipe_free(&out->secret_key);
        out->access_key = strdup(key);
        out->secret_key = strdup(secret);
        rc = out->access_key && out->secret_key ? 0 : -ENOMEM;
        if (rc || c2)
            break; /* a bucket-specific line beats a generic one */
    }
    if (line) {
        memset(line, 0, cap);
        free(line);
    }
    if (ini) {
        rewind(f);
        struct ini_hit h = {0};
        rc = ini_read_stream(f, profile ? profile : "default", false, &h);
        if (!rc && (!h.access_key || !h.secret_key))
            rc = -EINVAL;
        if (!rc) {
            wipe_free(&out->access_key);
            wipe_free(&out->secret_key);
            take(&out->access_key, &h.access_key);
            take(&out->secret_key, &h.secret_key);
            take(&out->session_token, &h.session_token);
            take(&out->region, &h.region);
            take(&out->endpoint_url, &h.endpoint_url);
        }
        ini_hit_clear(&h);
    }
    return rc;
}

/* A credentials file given by option: s3fs passwd or AWS ini format. Opened
 * once (O_NOFOLLOW) and checked on that descriptor, so what is checked is
 * what is read. */
static int from_file(const struct om_creds_options *opt, struct om_creds *out, char *err,
                     size_t errlen)
{
    const char *path = opt->credentials_file;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "credentials file %s: %s", path,
                 e == ELOOP ? "is a symbolic link (give the file itself)" : strerror(e));
        return e == ELOOP ? -EINVAL : -e;
    }
    struct stat st;
    int rc = fstat(fd, &st) != 0 ? -errno : om_creds_file_check(&st, getuid());
    if (rc == -EINVAL) {
        snprintf(err, errlen, "credentials file %s is not a regular file", path);
    } else if (rc == -EPERM) {
        snprintf(err, errlen, "credentials file %s belongs to uid %u, not to you (uid %u) or root",
                 path, (unsigned)st.st_uid, (unsigned)getuid());
        rc = -EACCES;
    } else if (rc == -EACCES) {
        snprintf(err, errlen,
                 "credentials file %s is accessible by group or others (mode %04o); "
                 "run: chmod 600 %s",
                 path, (unsigned)(st.st_mode & 07777), path);
    } else if (rc) {
        snprintf(err, errlen, "credentials file %s: %s", path, strerror(-rc));
    }
    FILE *f = rc ? NULL : fdopen(fd, "r");
    if (!f) {
        if (!rc)
            rc = -errno;
        close(fd);
        return rc;
    }
    rc = om_creds_parse_stream(f, opt->bucket, opt->aws_profile, out);
    fclose(f);
    if (rc == -EINVAL)
        snprintf(err, errlen,
                 "credentials file %s holds no ACCESS_KEY:SECRET line%s%s and no "
                 "[%s] section with aws_access_key_id and aws_secret_access_key",
                 path, opt->bucket ? " for bucket " : "", opt->bucket ? opt->bucket : "",
                 opt->aws_profile ? opt->aws_profile : "default");
    if (!rc)
        snprintf(out->source, sizeof(out->source), "credentials file %s", path);
    return rc;
}

int om_creds_file_check(const struct stat *st, uid_t uid)
{
    if (!S_ISREG(st->st_mode))
        return -EINVAL;
    if (st->st_uid != uid && st->st_uid != 0)
        return -EPERM;
    if (st->st_mode & 077)
        return -EACCES;
    return 0;
}

int om_creds_resolve(const struct om_creds_options *opt, struct om_creds *out, char *err,
                     size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (errlen)
        err[0] = '\0';
    int rc;
    if (opt->anonymous) {
        out->anonymous = true;
        snprintf(out->source, sizeof(out->source), "anonymous (option)");
        return 0;
    }
    if (opt->credentials_file) {
        rc = from_file(opt, out, err, errlen);
        goto done;
    }
    if (opt->aws_profile) {
        rc = from_profile(opt->aws_profile, out, err, errlen);
        if (rc == -ENOENT)
            snprintf(err, errlen, "AWS profile '%s' not found in the shared credentials or config "
                     "files", opt->aws_profile);
        goto done;
    }
    const char *id = env_nonempty("AWS_ACCESS_KEY_ID");
    const char *secret = env_nonempty("AWS_SECRET_ACCESS_KEY");
    if (id && secret) {
        rc = dup_field(&out->access_key, id) ?: dup_field(&out->secret_key, secret) ?:
             dup_field(&out->session_token, env_nonempty("AWS_SESSION_TOKEN"));
        snprintf(out->source, sizeof(out->source), "environment (AWS_ACCESS_KEY_ID)");
        goto done;
    }
    const char *token = env_nonempty("AIS_AUTHN_TOKEN");
    if (token) {
        rc = dup_field(&out->bearer_token, token);
        snprintf(out->source, sizeof(out->source), "environment (AIS_AUTHN_TOKEN)");
        goto done;
    }
    const char *profile = env_nonempty("AWS_PROFILE");
    rc = from_profile(profile ? profile : "default", out, err, errlen);
    if (rc == -ENOENT)
        snprintf(err, errlen,
                 "no credentials found: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
                 "AWS_PROFILE, AIS_AUTHN_TOKEN, -o credentials=FILE, or -o anonymous");
done:
    if (rc) {
        om_creds_clear(out);
        if (rc == -ENOMEM)
            snprintf(err, errlen, "out of memory reading credentials");
        return rc;
    }
    /* A region from the profile config applies even when keys came from elsewhere. */
    if (!out->region && !opt->credentials_file) {
        struct om_creds tmp = {0};
        char e[8];
        const char *p = opt->aws_profile ? opt->aws_profile : env_nonempty("AWS_PROFILE");
        if (from_profile(p ? p : "default", &tmp, e, sizeof(e)) != -ENOMEM) {
            take(&out->region, &tmp.region);
            take(&out->endpoint_url, &tmp.endpoint_url);
        }
        om_creds_clear(&tmp);
    }
    return 0;
}
