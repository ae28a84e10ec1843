/* Staging and recovery files: sidecars, leftovers of dead daemons, data
 * kept when a commit finally fails. */
#include "objmount/writer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "objmount/log.h"
#include "objmount/util.h"
#include "writer_int.h"

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* Write a sidecar describing staged or recovered data. */
int wi_write_sidecar(const char *path, struct om_writers *ws, struct om_writer *w,
                         const char *state, const char *md5hex)
{
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -errno;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char when[32];
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(f, "{\n  \"state\": ");
    json_str(f, state);
    fprintf(f, ",\n  \"bucket\": ");
    json_str(f, ws->bucket);
    fprintf(f, ",\n  \"key\": ");
    json_str(f, w->key);
    fprintf(f, ",\n  \"endpoint\": ");
    json_str(f, ws->endpoint);
    fprintf(f, ",\n  \"size\": %" PRIu64 ",\n  \"md5\": ", w->size);
    json_str(f, md5hex ? md5hex : "");
    fprintf(f, ",\n  \"upload_id\": ");
    json_str(f, w->upload_id ? w->upload_id : "");
    fprintf(f, ",\n  \"time\": ");
    json_str(f, when);
    fprintf(f, ",\n  \"pid\": %d,\n  \"last_error\": ", (int)getpid());
    json_str(f, w->last_error);
    if (w->meta.has_mode)
        fprintf(f, ",\n  \"mode\": %u", (unsigned)w->meta.mode);
    fprintf(f, "\n}\n");
    int rc = fflush(f) == 0 && fsync(fileno(f)) == 0 ? 0 : -errno;
    if (fclose(f) != 0 && !rc)
        rc = -errno;
    if (!rc && rename(tmp, path) != 0)
        rc = -errno;
    if (rc)
        unlink(tmp);
    return rc;
}

int wi_mkdir_p(const char *path, mode_t mode)
{
    char buf[4096];
    if (om_strlcpy(buf, path, sizeof(buf)))
        return -ENAMETOOLONG;
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, mode) != 0 && errno != EEXIST)
                return -errno;
            *p = '/';
        }
    }
    if (mkdir(buf, mode) != 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* Rewrite the state of a moved sidecar: its daemon died before a commit. */
static void mark_interrupted(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char text[16384];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *from = "\"state\": \"staging\"";
    char *at = strstr(text, from);
    if (!at)
        return;
    /* a new file renamed over the old one: a crash never leaves half a sidecar */
    char tmp[4300];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "w");
    if (!f)
        return;
    fprintf(f, "%.*s\"state\": \"interrupted\"%s", (int)(at - text), text, at + strlen(from));
    bool ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (fclose(f) != 0)
        ok = false;
    if (!ok || rename(tmp, path) != 0)
        unlink(tmp);
}

/* Move staging files whose daemon is gone into recovery. */
void wi_recover_leftovers(struct om_writers *ws)
{
    DIR *d = opendir(ws->staging_dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".data") != 0)
            continue;
        char data[4200], side[4200], rdata[4200], rside[4200];
        snprintf(data, sizeof(data), "%s/%s", ws->staging_dir, e->d_name);
        snprintf(side, sizeof(side), "%s/%.*s.json", ws->staging_dir, (int)(n - 5), e->d_name);
        int fd = open(data, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            close(fd); /* a live daemon owns it */
            continue;
        }
        snprintf(rdata, sizeof(rdata), "%s/%s", ws->recovery_dir, e->d_name);
        snprintf(rside, sizeof(rside), "%s/%.*s.json", ws->recovery_dir, (int)(n - 5), e->d_name);
        if (rename(data, rdata) == 0) {
            if (rename(side, rside) != 0)
                om_warn("recovery: %s has no sidecar", rdata);
            else
                mark_interrupted(rside);
            ws->st.recovered++;
            om_error("a previous objmount stopped before uploading %s: data kept in %s", data,
                     rdata);
        }
        close(fd);
    }
    closedir(d);
}

int wi_staging_create(struct om_writers *ws, struct om_writer *w)
{
    char tmpl[4200];
    snprintf(tmpl, sizeof(tmpl), "%s/XXXXXX.data", ws->staging_dir);
    int fd = mkostemps(tmpl, 5, O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = -errno;
        close(fd);
        unlink(tmpl);
        return e;
    }
    w->fd = fd;
    w->path = strdup(tmpl);
    size_t n = strlen(tmpl);
    w->sidecar = malloc(n + 1);
    if (!w->path || !w->sidecar)
        return -ENOMEM;
    memcpy(w->sidecar, tmpl, n - 5);
    strcpy(w->sidecar + n - 5, ".json");
    return wi_write_sidecar(w->sidecar, ws, w, "staging", NULL);
}

/* Keep the bytes that could not be uploaded. Caller holds w->lock. */
void wi_keep_in_recovery(struct om_writer *w)
{
    struct om_writers *ws = w->ws;
    unsigned char md5[OM_MD5_LEN];
    char hex[2 * OM_MD5_LEN + 1] = "";
    if (om_digest_fd_range(OM_DIGEST_MD5, w->fd, 0, w->size, md5) == 0)
        om_hex(md5, OM_MD5_LEN, hex);
    time_t now = time(NULL);
    char base[4200], data[4300], side[4300];
    snprintf(base, sizeof(base), "%s/%ld-%d-%" PRIu64, ws->recovery_dir, (long)now, (int)getpid(),
             w->ino);
    snprintf(data, sizeof(data), "%s.data", base);
    snprintf(side, sizeof(side), "%s.json", base);
    if (w->recovery) {
        /* replace the entry of an earlier failed commit */
        unlink(w->recovery);
        char old[4300];
        snprintf(old, sizeof(old), "%.*s.json", (int)strlen(w->recovery) - 5, w->recovery);
        unlink(old);
        free(w->recovery);
        w->recovery = NULL;
    }
    if (link(w->path, data) != 0) {
        om_error("could not keep %s in recovery (%s): the data stays in %s until it is closed",
                 w->key, strerror(errno), w->path);
        return;
    }
    wi_write_sidecar(side, ws, w, "failed", hex);
    w->recovery = strdup(data);
    pthread_mutex_lock(&ws->lock);
    ws->st.recovered++;
    pthread_mutex_unlock(&ws->lock);
    om_error("could not upload %s (%s): %" PRIu64 " bytes kept in %s", w->key, w->last_error,
             w->size, data);
}

