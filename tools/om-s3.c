/* om-s3: objmount's S3 client on the command line.
 *
 * A diagnostic tool and the driver of the protocol integration tests: every
 * S3 operation objmount uses, with the same options, credentials chain,
 * retries and redirect handling as the daemon.
 *
 *   om-s3 [-o OPTS] [--stats] BUCKET COMMAND [ARGS]
 *
 * Output is line-oriented; errors print one line on stderr and exit with
 * status 1 (2 for usage errors). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "objmount/client.h"
#include "objmount/digest.h"
#include "objmount/log.h"
#include "objmount/util.h"

static const char usage[] =
    "usage: om-s3 [-o OPTS] [--stats] BUCKET COMMAND [ARGS]\n"
    "commands:\n"
    "  check                       list one key; print clock skew\n"
    "  head KEY                    print size, etag, mtime, content type, s3fs metadata\n"
    "  get KEY [OFF LEN] [--if-match ETAG] [-O FILE]\n"
    "                              ranged GET to stdout or FILE\n"
    "  put KEY FILE [--meta NAME=VALUE]...\n"
    "                              single PUT with Content-MD5\n"
    "  mpu KEY FILE PART_SIZE      multipart upload, parts in parallel\n"
    "  list [--prefix P] [--delimiter D] [--start-after S] [--max-keys N] [--token T] [--all]\n"
    "  uploads [--prefix P]        in-progress multipart uploads\n"
    "  abort KEY UPLOAD_ID\n"
    "  copy SRC_KEY DST_KEY\n"
    "  delete KEY\n";

static struct om_client client;

static int fail(const char *op, const char *key, int rc, const struct om_store_error *err)
{
    fprintf(stderr, "om-s3: %s %s: %s", op, key ? key : "", strerror(-rc));
    if (err && (err->status || err->code[0] || err->message[0]))
        fprintf(stderr, " (HTTP %ld%s%s%s%s)", err->status, err->code[0] ? " " : "", err->code,
                err->message[0] ? ": " : "", err->message);
    fprintf(stderr, "\n");
    return 1;
}

static int cmd_check(void)
{
    long skew = 0;
    struct om_store_error err;
    int rc = om_store_check_bucket(client.store, &skew, &err);
    if (rc)
        return fail("check", client.cfg->bucket, rc, &err);
    printf("ok skew=%ld\n", skew);
    return 0;
}

static int cmd_head(const char *key)
{
    struct om_object o;
    struct om_store_error err;
    int rc = om_store_head(client.store, key, &o, &err);
    if (rc)
        return fail("head", key, rc, &err);
    printf("size=%" PRIu64 " etag=%s mtime=%ld content_type=%s", o.size, o.etag, (long)o.mtime,
           o.content_type);
    if (o.has_mode)
        printf(" mode=%o", o.mode);
    if (o.has_uid)
        printf(" uid=%u", o.uid);
    if (o.has_gid)
        printf(" gid=%u", o.gid);
    if (o.has_mtime)
        printf(" meta_mtime=%ld", (long)o.meta_mtime.tv_sec);
    printf("\n");
    return 0;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int cmd_get(const char *key, uint64_t off, uint64_t len, bool ranged, const char *if_match,
                   const char *out)
{
    struct om_object o;
    struct om_store_error err;
    if (!ranged) {
        int rc = om_store_head(client.store, key, &o, &err);
        if (rc)
            return fail("head", key, rc, &err);
        off = 0;
        len = o.size;
    }
    int fd = out ? open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644) : STDOUT_FILENO;
    if (fd < 0) {
        perror(out);
        return 1;
    }
    enum { CHUNK = 64 << 20 };
    char *buf = malloc(CHUNK);
    if (!buf)
        return fail("get", key, -ENOMEM, NULL);
    int status = 0;
    while (len > 0) {
        uint64_t want = len < CHUNK ? len : CHUNK;
        ssize_t got = om_store_get_range(client.store, key, off, want, if_match, buf, &o, &err);
        if (got < 0) {
            status = fail("get", key, (int)got, &err);
            break;
        }
        if (got == 0)
            break;
        int rc = write_all(fd, buf, (size_t)got);
        if (rc) {
            status = fail("write", out ? out : "stdout", rc, NULL);
            break;
        }
        off += (uint64_t)got;
        len -= (uint64_t)got;
    }
    free(buf);
    if (out)
        close(fd);
    return status;
}

/* mode=N (decimal st_mode, as s3fs writes it), uid=N, gid=N or mtime=SECONDS */
static int add_meta(struct om_file_meta *meta, const char *spec)
{
    const char *eq = strchr(spec, '=');
    uint64_t v;
    if (!eq || om_parse_uint(eq + 1, UINT32_MAX, &v))
        return -EINVAL;
    size_t n = (size_t)(eq - spec);
    if (n == 4 && strncmp(spec, "mode", 4) == 0)
        meta->has_mode = true, meta->mode = (mode_t)v;
    else if (n == 3 && strncmp(spec, "uid", 3) == 0)
        meta->has_uid = true, meta->uid = (uid_t)v;
    else if (n == 3 && strncmp(spec, "gid", 3) == 0)
        meta->has_gid = true, meta->gid = (gid_t)v;
    else if (n == 5 && strncmp(spec, "mtime", 5) == 0)
        meta->has_mtime = true, meta->mtime.tv_sec = (time_t)v;
    else
        return -EINVAL;
    return 0;
}

static int open_file(const char *path, uint64_t *size)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        perror(path);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *size = (uint64_t)st.st_size;
    return fd;
}

static int cmd_put(const char *key, const char *path, const struct om_file_meta *meta)
{
    uint64_t size;
    int fd = open_file(path, &size);
    if (fd < 0)
        return 1;
    unsigned char md5[OM_MD5_LEN];
    int rc = om_digest_fd_range(OM_DIGEST_MD5, fd, 0, size, md5);
    if (rc) {
        close(fd);
        return fail("md5", path, rc, NULL);
    }
    struct om_http_body body = {.kind = OM_BODY_FD, .fd = fd, .off = 0, .len = size};
    struct om_put_opts opts = {.meta = meta};
    struct om_object stored = {0};
    struct om_store_error err;
    rc = om_store_put(client.store, key, &body, md5, &opts, &stored, &err);
    close(fd);
    if (rc)
        return fail("put", key, rc, &err);
    char hex[33];
    om_hex(md5, OM_MD5_LEN, hex);
    if (stored.sum.type == OM_SUM_MD5 && strcmp(stored.sum.hex, hex) != 0) {
        /* a protocol tool says what the server answered; the mount reads
         * such an object back before it believes either */
        snprintf(err.message, sizeof(err.message), "server ETag %s differs from the MD5 sent %s",
                 stored.etag, hex);
        return fail("put", key, -EBADMSG, &err);
    }
    printf("etag=%s md5=%s\n", stored.etag, hex);
    return 0;
}

struct mpu_state {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int inflight;
};

static void part_done(struct om_store_part_put *p)
{
    struct mpu_state *st = p->ud;
    pthread_mutex_lock(&st->lock);
    st->inflight--;
    pthread_cond_signal(&st->cond);
    pthread_mutex_unlock(&st->lock);
}

static int cmd_mpu(const char *key, const char *path, uint64_t part_size)
{
    uint64_t size;
    int fd = open_file(path, &size);
    if (fd < 0)
        return 1;
    int nparts = size == 0 ? 1 : (int)((size + part_size - 1) / part_size);
    int max_parts = om_store_caps(client.store)->max_parts;
    if (nparts > max_parts) {
        close(fd);
        fprintf(stderr, "om-s3: %d parts is more than %d\n", nparts, max_parts);
        return 1;
    }
    struct om_store_error err;
    char *upload_id = NULL;
    int rc = om_store_mpu_create(client.store, key, NULL, &upload_id, &err);
    if (rc) {
        close(fd);
        return fail("create-multipart", key, rc, &err);
    }
    struct om_store_part_put *parts = calloc((size_t)nparts, sizeof(*parts));
    unsigned char (*md5s)[OM_MD5_LEN] = calloc((size_t)nparts, OM_MD5_LEN);
    struct om_store_part *done = calloc((size_t)nparts, sizeof(*done));
    struct mpu_state st = {.inflight = 0};
    pthread_mutex_init(&st.lock, NULL);
    pthread_cond_init(&st.cond, NULL);
    for (int i = 0; i < nparts && rc == 0; i++) {
        struct om_store_part_put *p = &parts[i];
        uint64_t off = (uint64_t)i * part_size;
        uint64_t len = OM_MIN(part_size, size - off);
        p->key = key;
        p->upload_id = upload_id;
        p->number = i + 1;
        p->body = (struct om_http_body){.kind = OM_BODY_FD, .fd = fd, .off = (off_t)off, .len = len};
        p->done = part_done;
        p->ud = &st;
        rc = om_digest_fd_range(OM_DIGEST_MD5, fd, (off_t)off, len, p->md5);
        memcpy(md5s[i], p->md5, OM_MD5_LEN);
        pthread_mutex_lock(&st.lock);
        while (st.inflight >= 8)
            pthread_cond_wait(&st.cond, &st.lock);
        if (!rc)
            st.inflight++;
        pthread_mutex_unlock(&st.lock);
        if (!rc && (rc = om_store_part_submit(client.store, p)) != 0) {
            pthread_mutex_lock(&st.lock);
            st.inflight--;
            pthread_mutex_unlock(&st.lock);
        }
    }
    pthread_mutex_lock(&st.lock);
    while (st.inflight > 0)
        pthread_cond_wait(&st.cond, &st.lock);
    pthread_mutex_unlock(&st.lock);
    int status = 0;
    for (int i = 0; i < nparts && status == 0; i++) {
        if (rc || parts[i].error) {
            status = fail("upload-part", key, rc ? rc : parts[i].error, rc ? NULL : &parts[i].err);
            break;
        }
        char hex[2 * OM_MD5_LEN + 1];
        om_hex(parts[i].md5, OM_MD5_LEN, hex);
        if (strlen(parts[i].etag) == 32 && strcasecmp(parts[i].etag, hex) != 0) {
            /* the tool says what the server answered, whatever it learned */
            snprintf(err.message, sizeof(err.message),
                     "part %d: server ETag %s differs from the MD5 sent %s", parts[i].number,
                     parts[i].etag, hex);
            status = fail("upload-part", key, -EBADMSG, &err);
            break;
        }
        done[i].number = parts[i].number;
        memcpy(done[i].etag, parts[i].etag, OM_ETAG_MAX);
    }
    char etag[OM_ETAG_MAX] = "";
    if (status == 0) {
        rc = om_store_mpu_complete(client.store, key, upload_id, done, nparts, etag, &err);
        if (rc)
            status = fail("complete-multipart", key, rc, &err);
    }
    if (status) {
        om_store_mpu_abort(client.store, key, upload_id, NULL);
    } else {
        struct om_sum expect;
        om_sum_of_parts((const unsigned char(*)[OM_MD5_LEN])md5s, nparts, &expect);
        printf("etag=%s multipart_etag=%s-%d parts=%d upload_id=%s\n", etag, expect.hex, nparts,
               nparts, upload_id);
    }
    free(parts);
    free(md5s);
    free(done);
    free(upload_id);
    close(fd);
    return status;
}

static int print_entry(void *ud, const struct om_list_entry *e)
{
    (void)ud;
    if (e->is_prefix)
        printf("P\t%s\n", e->key);
    else
        printf("K\t%s\t%" PRIu64 "\t%s\t%ld\n", e->key, e->size, e->etag, (long)e->mtime);
    return 0;
}

static int cmd_list(struct om_list_params *p, bool all)
{
    struct om_store_error err;
    int rc;
    if (all) {
        rc = om_store_list_all(client.store, p->prefix, p->delimiter, print_entry, NULL, &err);
        if (rc)
            return fail("list", p->prefix, rc, &err);
        return 0;
    }
    char *next = NULL;
    rc = om_store_list_page(client.store, p, print_entry, NULL, &next, &err);
    if (rc)
        return fail("list", p->prefix, rc, &err);
    if (next)
        printf("NEXT\t%s\n", next);
    free(next);
    return 0;
}

static int print_upload(void *ud, const struct om_upload_entry *e)
{
    (void)ud;
    printf("U\t%s\t%s\t%ld\n", e->key, e->upload_id, (long)e->initiated);
    return 0;
}

static void print_stats(void)
{
    struct om_http_stats s;
    om_http_get_stats(client.http, &s);
    fprintf(stderr,
            "stats requests=%" PRIu64 " attempts=%" PRIu64 " retries=%" PRIu64
            " redirects=%" PRIu64 " failures=%" PRIu64 " short_bodies=%" PRIu64
            " bytes_in=%" PRIu64 " bytes_out=%" PRIu64 " connections=%" PRIu64 "\n",
            s.requests, s.attempts, s.retries, s.redirects, s.failures, s.short_bodies, s.bytes_in,
            s.bytes_out, s.connections);
}

int main(int argc, char **argv)
{
    struct om_config cfg;
    om_config_init(&cfg);
    char err[512];
    bool stats = false, all = false;
    const char *if_match = NULL, *out = NULL;
    struct om_list_params lp = {0};
    struct om_file_meta meta = {0};
    enum { O_STATS = 256, O_IFMATCH, O_PREFIX, O_DELIM, O_START, O_MAXKEYS, O_TOKEN, O_ALL, O_META };
    static const struct option longopts[] = {
        {"stats", no_argument, NULL, O_STATS},
        {"if-match", required_argument, NULL, O_IFMATCH},
        {"prefix", required_argument, NULL, O_PREFIX},
        {"delimiter", required_argument, NULL, O_DELIM},
        {"start-after", required_argument, NULL, O_START},
        {"max-keys", required_argument, NULL, O_MAXKEYS},
        {"token", required_argument, NULL, O_TOKEN},
        {"all", no_argument, NULL, O_ALL},
        {"meta", required_argument, NULL, O_META},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "o:O:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'o':
            if (om_config_parse_opts(&cfg, optarg, err, sizeof(err))) {
                fprintf(stderr, "om-s3: %s\n", err);
                return 2;
            }
            break;
        case 'O':
            out = optarg;
            break;
        case O_STATS:
            stats = true;
            break;
        case O_IFMATCH:
            if_match = optarg;
            break;
        case O_PREFIX:
            lp.prefix = optarg;
            break;
        case O_DELIM:
            lp.delimiter = optarg;
            break;
        case O_START:
            lp.start_after = optarg;
            break;
        case O_MAXKEYS: {
            uint64_t mk;
            if (om_parse_uint(optarg, 1000000, &mk))
                return fprintf(stderr, "om-s3: --max-keys wants a number\n"), 2;
            lp.max_keys = (int)mk;
            break;
        }
        case O_TOKEN:
            lp.continuation = optarg;
            break;
        case O_ALL:
            all = true;
            break;
        case O_META:
            if (add_meta(&meta, optarg)) {
                fprintf(stderr, "om-s3: --meta wants NAME=VALUE\n");
                return 2;
            }
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return 2;
        }
    }
    int nargs = argc - optind;
    if (nargs < 2) {
        fputs(usage, stderr);
        return 2;
    }
    om_log_init("om-s3", cfg.log_level, false);
    if (om_config_set_source(&cfg, argv[optind], err, sizeof(err))) {
        fprintf(stderr, "om-s3: %s\n", err);
        return 2;
    }
    const char *cmd = argv[optind + 1];
    char **args = argv + optind + 2;
    int na = nargs - 2;
    int status;
    int rc = om_client_open(&client, &cfg, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "om-s3: %s\n", err);
        return 1;
    }
    if (strcmp(cmd, "check") == 0 && na == 0) {
        status = cmd_check();
    } else if (strcmp(cmd, "head") == 0 && na == 1) {
        status = cmd_head(args[0]);
    } else if (strcmp(cmd, "get") == 0 && (na == 1 || na == 3)) {
        uint64_t off = 0, len = 0;
        if (na == 3 && (om_parse_size(args[1], &off) || om_parse_size(args[2], &len))) {
            fputs(usage, stderr);
            status = 2;
        } else {
            status = cmd_get(args[0], off, len, na == 3, if_match, out);
        }
    } else if (strcmp(cmd, "put") == 0 && na == 2) {
        status = cmd_put(args[0], args[1], &meta);
    } else if (strcmp(cmd, "mpu") == 0 && na == 3) {
        uint64_t ps;
        if (om_parse_size(args[2], &ps) || ps == 0) {
            fputs(usage, stderr);
            status = 2;
        } else {
            status = cmd_mpu(args[0], args[1], ps);
        }
    } else if (strcmp(cmd, "list") == 0 && na == 0) {
        status = cmd_list(&lp, all);
    } else if (strcmp(cmd, "uploads") == 0 && na == 0) {
        struct om_store_error e;
        rc = om_store_mpu_list(client.store, lp.prefix, print_upload, NULL, &e);
        status = rc ? fail("uploads", lp.prefix, rc, &e) : 0;
    } else if (strcmp(cmd, "abort") == 0 && na == 2) {
        struct om_store_error e;
        rc = om_store_mpu_abort(client.store, args[0], args[1], &e);
        status = rc ? fail("abort", args[0], rc, &e) : 0;
    } else if (strcmp(cmd, "copy") == 0 && na == 2) {
        struct om_store_error e;
        char etag[OM_ETAG_MAX];
        struct om_object src;
        rc = om_store_head(client.store, args[0], &src, &e);
        if (!rc)
            rc = om_store_copy(client.store, args[0], &src, args[1], NULL, etag, &e);
        status = rc ? fail("copy", args[0], rc, &e) : 0;
        if (!rc)
            printf("etag=%s\n", etag);
    } else if (strcmp(cmd, "delete") == 0 && na == 1) {
        struct om_store_error e;
        rc = om_store_delete(client.store, args[0], &e);
        status = rc ? fail("delete", args[0], rc, &e) : 0;
    } else {
        fputs(usage, stderr);
        status = 2;
    }
    fflush(stdout);
    if (stats)
        print_stats();
    om_client_close(&client);
    om_config_free(&cfg);
    return status;
}
