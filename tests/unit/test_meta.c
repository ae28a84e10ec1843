/* The namespace's compact records (issue 16): ETags kept as 16 bytes when
 * they are MD5s and as text otherwise, exactly as they came; listing
 * entries found by name through their index; file keys made from the
 * directory's key and the name, following renames, and kept by files
 * unlinked from their name. No server: nothing here makes a request. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objmount/meta.h"
#include "meta_int.h"

#include "check_main.h"

static const char *const md5 = "0123456789abcdef0123456789abcdef";

/* parse, then format (binary) or keep (text): what comes back */
static enum mi_etag_kind round_trip(const char *etag, char out[OM_ETAG_MAX])
{
    uint8_t bin[16];
    uint16_t parts = 0;
    enum mi_etag_kind k = mi_etag_parse(etag, bin, &parts);
    if (k == MI_ETAG_MD5 || k == MI_ETAG_MULTI)
        mi_etag_format(k, bin, parts, out);
    else
        snprintf(out, OM_ETAG_MAX, "%s", etag ? etag : "");
    return k;
}

START_TEST(test_md5_etags_are_binary_and_round_trip)
{
    char out[OM_ETAG_MAX];
    ck_assert_int_eq(round_trip(md5, out), MI_ETAG_MD5);
    ck_assert_str_eq(out, md5);
    ck_assert_int_eq(round_trip("ffffffffffffffffffffffffffffffff", out), MI_ETAG_MD5);
    ck_assert_str_eq(out, "ffffffffffffffffffffffffffffffff");
}
END_TEST

START_TEST(test_multipart_etags_are_binary_up_to_65535_parts)
{
    char out[OM_ETAG_MAX], in[OM_ETAG_MAX];
    const unsigned parts[] = {1, 9, 10, 10000, 65535};
    for (size_t k = 0; k < sizeof(parts) / sizeof(parts[0]); k++) {
        snprintf(in, sizeof(in), "%s-%u", md5, parts[k]);
        ck_assert_int_eq(round_trip(in, out), MI_ETAG_MULTI);
        ck_assert_str_eq(out, in);
    }
}
END_TEST

START_TEST(test_other_etags_stay_text)
{
    const char *text[] = {
        "0123456789ABCDEF0123456789ABCDEF",    /* uppercase would come back lowercase */
        "0123456789abcdef0123456789abcde",     /* 31 digits */
        "0123456789abcdef0123456789abcdef0",   /* 33 */
        "0123456789abcdef0123456789abcdef-0",  /* no part 0 */
        "0123456789abcdef0123456789abcdef-01", /* leading zero would be lost */
        "0123456789abcdef0123456789abcdef-65536",
        "0123456789abcdef0123456789abcdef-",
        "0123456789abcdef0123456789abcdef-1x",
        "\"0123456789abcdef0123456789abcdef\"",
        "W/\"x\"",
        "ais-v1-9f2c",
    };
    char out[OM_ETAG_MAX];
    for (size_t k = 0; k < sizeof(text) / sizeof(text[0]); k++) {
        ck_assert_int_eq(round_trip(text[k], out), MI_ETAG_TEXT);
        ck_assert_str_eq(out, text[k]);
    }
    ck_assert_int_eq(round_trip("", out), MI_ETAG_NONE);
    ck_assert_int_eq(round_trip(NULL, out), MI_ETAG_NONE);
}
END_TEST

START_TEST(test_listing_entries_keep_their_etag_text)
{
    struct listing *l = mi_listing_new(NULL);
    char multi[OM_ETAG_MAX], longer[200], out[OM_ETAG_MAX];
    snprintf(multi, sizeof(multi), "%s-12", md5);
    memset(longer, 'x', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = '\0';
    ck_assert_int_eq(mi_listing_add(l, "a", false, 1, 10, md5), 0);
    ck_assert_int_eq(mi_listing_add(l, "b", false, 2, 20, multi), 0);
    ck_assert_int_eq(mi_listing_add(l, "c", false, 3, 30, "ais-1"), 0);
    ck_assert_int_eq(mi_listing_add(l, "d", false, 4, 40, ""), 0);
    ck_assert_int_eq(mi_listing_add(l, "e", false, 5, 50, longer), 0);
    ck_assert_int_eq(mi_listing_add(l, "f", true, 0, 0, NULL), 0);
    mi_dentry_etag(mi_listing_find(l, "a"), out);
    ck_assert_str_eq(out, md5);
    mi_dentry_etag(mi_listing_find(l, "b"), out);
    ck_assert_str_eq(out, multi);
    mi_dentry_etag(mi_listing_find(l, "c"), out);
    ck_assert_str_eq(out, "ais-1");
    mi_dentry_etag(mi_listing_find(l, "d"), out);
    ck_assert_str_eq(out, "");
    mi_dentry_etag(mi_listing_find(l, "e"), out); /* what an inode keeps of it */
    ck_assert_uint_eq(strlen(out), OM_ETAG_MAX - 1);
    ck_assert(strncmp(out, longer, OM_ETAG_MAX - 1) == 0);
    mi_dentry_etag(mi_listing_find(l, "f"), out);
    ck_assert_str_eq(out, "");
    struct dentry *c = mi_listing_find(l, "c");
    ck_assert_uint_eq(c->size, 3);
    ck_assert_int_eq(c->mtime, 30);
    /* a text ETag as long as the one before fits in its place */
    mi_dentry_set_etag(c, "ais-2");
    mi_dentry_etag(c, out);
    ck_assert_str_eq(out, "ais-2");
    mi_dentry_set_etag(c, md5);
    mi_dentry_etag(c, out);
    ck_assert_str_eq(out, md5);
    /* a longer text than the entry has room for: it is kept all the same */
    ck_assert(!mi_dentry_set_etag(c, "ais-v2-longer"));
    struct dentry *moved = mi_listing_set_etag(l, c, "ais-v2-longer");
    ck_assert_ptr_eq(mi_listing_find(l, "c"), moved);
    ck_assert_ptr_eq(l->v[2], moved);
    mi_dentry_etag(moved, out);
    ck_assert_str_eq(out, "ais-v2-longer");
    ck_assert_uint_eq(moved->size, 3);
    ck_assert_int_eq(moved->mtime, 30);
    mi_listing_put(l);
}
END_TEST

START_TEST(test_listing_finds_every_name_in_order)
{
    struct listing *l = mi_listing_new(NULL);
    char name[32];
    enum { N = 20000 };
    for (int k = 0; k < N; k++) {
        snprintf(name, sizeof(name), "n%05d", k);
        ck_assert_int_eq(mi_listing_add(l, name, k % 7 == 0, (uint64_t)k, k, md5), 0);
    }
    ck_assert_uint_eq(l->n, N);
    for (int k = 0; k < N; k++) {
        snprintf(name, sizeof(name), "n%05d", k);
        ck_assert_int_eq(mi_listing_pos(l, name), k);
        ck_assert_str_eq(l->v[k]->name, name);
        ck_assert_uint_eq(l->v[k]->size, (uint64_t)k);
        ck_assert_int_eq(l->v[k]->is_dir, k % 7 == 0);
    }
    ck_assert_ptr_null(mi_listing_find(l, "n20000"));
    ck_assert_int_eq(mi_listing_pos(l, "missing"), -1);
    mi_listing_put(l);
}
END_TEST

START_TEST(test_listing_names_go_and_come_back)
{
    struct listing *l = mi_listing_new(NULL);
    ck_assert_ptr_null(mi_listing_find(l, "x"));
    ck_assert_int_eq(mi_listing_add(l, "x", false, 1, 1, md5), 0);
    ck_assert_int_eq(mi_listing_add(l, "y", false, 1, 1, md5), 0);
    /* a directory hides an object of the same name */
    ck_assert_int_eq(mi_listing_add(l, "y", true, 0, 0, NULL), 0);
    ck_assert(mi_listing_find(l, "y")->is_dir);
    ck_assert_uint_eq(l->n, 2);
    mi_listing_remove(l, "x");
    ck_assert(mi_listing_find(l, "x")->gone);
    /* back with the same type: the same entry */
    ck_assert_int_eq(mi_listing_add(l, "x", false, 7, 7, "t"), 0);
    ck_assert_uint_eq(l->n, 2);
    ck_assert(!mi_listing_find(l, "x")->gone);
    ck_assert_uint_eq(mi_listing_find(l, "x")->size, 7);
    /* back as a directory: a new entry, the old one stays gone in place */
    mi_listing_remove(l, "x");
    ck_assert_int_eq(mi_listing_add(l, "x", true, 0, 0, NULL), 0);
    ck_assert_uint_eq(l->n, 3);
    ck_assert_int_eq(mi_listing_pos(l, "x"), 2);
    ck_assert(l->v[0]->gone && !l->v[2]->gone && l->v[2]->is_dir);
    mi_listing_put(l);
}
END_TEST

START_TEST(test_inode_tables_find_what_stays_after_removals)
{
    enum { N = 5000 };
    struct inode **v = calloc(N, sizeof(*v));
    struct mi_table by_ino, by_name;
    ck_assert_int_eq(mi_table_init(&by_ino, 0, NULL), 0);
    ck_assert_int_eq(mi_table_init(&by_name, 0, NULL), 0);
    for (int k = 0; k < N; k++) {
        v[k] = calloc(1, sizeof(struct inode) + 16);
        v[k]->ino = (uint64_t)k * 7919;
        v[k]->name_len = (uint8_t)snprintf(v[k]->name_inline, 16, "x%d", k);
        ck_assert_int_eq(mi_table_add(&by_ino, v[k], false), 0);
        ck_assert_int_eq(mi_table_add(&by_name, v[k], true), 0);
    }
    /* remove every third: whatever probed past a freed slot is found */
    for (int k = 0; k < N; k += 3) {
        mi_table_del(&by_ino, v[k], false);
        mi_table_del(&by_name, v[k], true);
    }
    char name[16];
    for (int k = 0; k < N; k++) {
        snprintf(name, sizeof(name), "x%d", k);
        struct inode *want = k % 3 ? v[k] : NULL;
        ck_assert_ptr_eq(mi_table_ino(&by_ino, (uint64_t)k * 7919), want);
        ck_assert_ptr_eq(mi_table_name(&by_name, name), want);
    }
    ck_assert_uint_eq(by_ino.n, N - (N + 2) / 3);
    ck_assert_uint_eq(by_name.n, by_ino.n);
    mi_table_destroy(&by_ino);
    mi_table_destroy(&by_name);
    for (int k = 0; k < N; k++)
        free(v[k]);
    free(v);
}
END_TEST

static struct om_meta *new_meta(void)
{
    struct om_meta_config cfg = {.prefix = "p/",
                                 .attr_ttl_ms = 3600000,
                                 .entry_ttl_ms = 3600000,
                                 .file_mode = 0644,
                                 .dir_mode = 0755,
                                 .metadata = OM_META_LISTING};
    struct om_meta *m = om_meta_new(NULL, &cfg);
    ck_assert_ptr_nonnull(m);
    m->stopping = true;
    return m;
}

/* A linked child of parent (directory or file with etag), as a lookup
 * leaves it. */
static uint64_t add(struct om_meta *m, uint64_t parent, const char *name, bool is_dir,
                    const char *etag)
{
    pthread_mutex_lock(&m->lock);
    struct inode *c = mi_child_for(m, mi_inode_get(m, parent), name, is_dir);
    ck_assert_ptr_nonnull(c);
    if (!is_dir)
        mi_set_file_attrs(m, c, 5, 1000, etag);
    c->nlookup++;
    uint64_t ino = c->ino;
    pthread_mutex_unlock(&m->lock);
    return ino;
}

static void assert_key(struct om_meta *m, uint64_t ino, const char *want)
{
    char *key = NULL;
    ck_assert_int_eq(om_meta_key(m, ino, &key, NULL), 0);
    ck_assert_str_eq(key, want);
    free(key);
}

START_TEST(test_file_keys_follow_their_directory)
{
    struct om_meta *m = new_meta();
    uint64_t d = add(m, OM_ROOT_INO, "d", true, NULL);
    uint64_t e = add(m, d, "e", true, NULL);
    uint64_t f = add(m, e, "f.jpg", false, md5);
    uint64_t g = add(m, e, "g.jpg", false, md5);
    assert_key(m, OM_ROOT_INO, "p/");
    assert_key(m, d, "p/d/");
    assert_key(m, f, "p/d/e/f.jpg");
    /* g is removed (its inode lives while the kernel holds it): it keeps
     * the key it had */
    om_meta_removed(m, e, "g.jpg");
    om_meta_renamed(m, OM_ROOT_INO, "d", OM_ROOT_INO, "renamed-dir");
    assert_key(m, d, "p/renamed-dir/");
    assert_key(m, e, "p/renamed-dir/e/");
    assert_key(m, f, "p/renamed-dir/e/f.jpg");
    assert_key(m, g, "p/d/e/g.jpg");
    /* a file moved to another directory under a longer name */
    om_meta_renamed(m, e, "f.jpg", OM_ROOT_INO, "a-much-longer-name.jpg");
    assert_key(m, f, "p/a-much-longer-name.jpg");
    pthread_mutex_lock(&m->lock);
    struct inode *fi = mi_child_get(m->root, "a-much-longer-name.jpg");
    ck_assert_ptr_nonnull(fi);
    ck_assert_uint_eq(fi->ino, f);
    ck_assert_ptr_null(mi_child_get(mi_inode_get(m, e), "f.jpg"));
    pthread_mutex_unlock(&m->lock);
    /* and back to a short one, in place */
    om_meta_renamed(m, OM_ROOT_INO, "a-much-longer-name.jpg", OM_ROOT_INO, "s");
    assert_key(m, f, "p/s");
    om_meta_free(m);
}
END_TEST

START_TEST(test_attributes_show_the_etag_as_text)
{
    struct om_meta *m = new_meta();
    uint64_t a = add(m, OM_ROOT_INO, "a", false, md5);
    uint64_t b = add(m, OM_ROOT_INO, "b", false, "not-an-md5");
    struct om_attr at;
    ck_assert_int_eq(om_meta_getattr_cached(m, a, &at), 0);
    ck_assert_str_eq(at.etag, md5);
    ck_assert_uint_eq(at.size, 5);
    ck_assert_int_eq(at.mtime.tv_sec, 1000);
    ck_assert_int_eq(om_meta_getattr_cached(m, b, &at), 0);
    ck_assert_str_eq(at.etag, "not-an-md5");
    char *key = NULL;
    bool exists = false;
    struct om_s3_object o;
    ck_assert_int_eq(om_meta_object(m, b, &key, &exists, &o), 0);
    ck_assert_str_eq(o.etag, "not-an-md5");
    ck_assert_str_eq(key, "p/b");
    free(key);
    om_meta_free(m);
}
END_TEST

static bool open_keeps_cache(struct om_meta *m, uint64_t ino)
{
    char *key = NULL;
    struct om_attr a;
    bool keep = true;
    ck_assert_int_eq(om_meta_open(m, ino, false, &key, &a, &keep), 0);
    free(key);
    om_meta_close(m, ino);
    return keep;
}

static void set_etag(struct om_meta *m, uint64_t ino, const char *etag)
{
    pthread_mutex_lock(&m->lock);
    mi_set_file_attrs(m, mi_inode_get(m, ino), 5, 1000, etag);
    pthread_mutex_unlock(&m->lock);
}

START_TEST(test_page_cache_is_kept_while_the_etag_is_the_one_cached)
{
    struct om_meta *m = new_meta();
    char other[OM_ETAG_MAX];
    snprintf(other, sizeof(other), "%s-2", md5);
    uint64_t f = add(m, OM_ROOT_INO, "f", false, md5);
    ck_assert(!open_keeps_cache(m, f)); /* nothing cached yet */
    ck_assert(open_keeps_cache(m, f));
    set_etag(m, f, other);
    ck_assert(!open_keeps_cache(m, f)); /* another version */
    ck_assert(open_keeps_cache(m, f));
    /* changed and changed back without an open: the cache holds this one */
    set_etag(m, f, "text-etag");
    set_etag(m, f, other);
    ck_assert(open_keeps_cache(m, f));
    set_etag(m, f, "text-etag");
    ck_assert(!open_keeps_cache(m, f));
    ck_assert(open_keeps_cache(m, f));
    set_etag(m, f, "");
    ck_assert(!open_keeps_cache(m, f)); /* an unknown ETag never keeps it */
    om_meta_free(m);
}
END_TEST

static Suite *meta_suite(void)
{
    Suite *s = suite_create("meta");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_md5_etags_are_binary_and_round_trip);
    tcase_add_test(tc, test_multipart_etags_are_binary_up_to_65535_parts);
    tcase_add_test(tc, test_other_etags_stay_text);
    tcase_add_test(tc, test_listing_entries_keep_their_etag_text);
    tcase_add_test(tc, test_listing_finds_every_name_in_order);
    tcase_add_test(tc, test_listing_names_go_and_come_back);
    tcase_add_test(tc, test_inode_tables_find_what_stays_after_removals);
    tcase_add_test(tc, test_file_keys_follow_their_directory);
    tcase_add_test(tc, test_attributes_show_the_etag_as_text);
    tcase_add_test(tc, test_page_cache_is_kept_while_the_etag_is_the_one_cached);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return om_check_run(meta_suite());
}
