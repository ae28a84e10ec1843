/* The credential chain: options, environment, shared files, AIStore token. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "objmount/creds.h"

#include "check_main.h"

static char home[256];

static void write_file(const char *name, const char *text, mode_t mode)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", home, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    chmod(path, mode);
}

static void setup(void)
{
    snprintf(home, sizeof(home), "/tmp/om-creds-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(home));
    char aws[300];
    snprintf(aws, sizeof(aws), "%s/.aws", home);
    mkdir(aws, 0700);
    setenv("HOME", home, 1);
    static const char *const vars[] = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                       "AWS_SESSION_TOKEN", "AWS_PROFILE", "AIS_AUTHN_TOKEN",
                                       "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);
}

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", home);
    if (system(cmd) != 0)
        fprintf(stderr, "cleanup of %s failed\n", home);
}

static const char shared[] = "[default]\n"
                             "aws_access_key_id = DEFAULTKEY\n"
                             "aws_secret_access_key = defaultsecret\n"
                             "\n[train]\n"
                             "aws_access_key_id=TRAINKEY\n"
                             "aws_secret_access_key=trainsecret\n"
                             "aws_session_token=traintoken\n";

static const char config[] = "[default]\nregion = eu-central-1\n"
                             "[profile cfgonly]\n"
                             "aws_access_key_id = CFGKEY\n"
                             "aws_secret_access_key = cfgsecret\n"
                             "region = ap-south-1\n"
                             "endpoint_url = http://127.0.0.1:9000\n";

START_TEST(test_default_profile_from_shared_file)
{
    write_file(".aws/credentials", shared, 0600);
    write_file(".aws/config", config, 0600);
    struct om_creds_options o = {0};
    struct om_creds c;
    char err[256];
    ck_assert_int_eq(om_creds_resolve(&o, &c, err, sizeof(err)), 0);
    ck_assert_str_eq(c.access_key, "DEFAULTKEY");
    ck_assert_str_eq(c.secret_key, "defaultsecret");
    ck_assert_ptr_null(c.session_token);
    ck_assert_str_eq(c.region, "eu-central-1");
    ck_assert_ptr_nonnull(strstr(c.source, "profile default"));
    om_creds_clear(&c);
}
END_TEST

START_TEST(test_environment_beats_profile)
{
    write_file(".aws/credentials", shared, 0600);
    setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
    setenv("AWS_SESSION_TOKEN", "envtoken", 1);
    struct om_creds_options o = {0};
    struct om_creds c;
    char err[256];
    ck_assert_int_eq(om_creds_resolve(&o, &c, err, sizeof(err)), 0);
    ck_assert_str_eq(c.access_key, "ENVKEY");
    ck_assert_str_eq(c.session_token, "envtoken");
    ck_assert_ptr_null(strstr(c.source, "envsecret"));
    om_creds_clear(&c);
}
END_TEST

START_TEST(test_aws_profile_env_and_option)
{
    write_file(".aws/credentials", shared, 0600);
    write_file(".aws/config", config, 0600);
    setenv("AWS_PROFILE", "train", 1);
    struct om_creds_options o = {0};
    struct om_creds c;
    char err[256];
    ck_assert_int_eq(om_creds_resolve(&o, &c, err, sizeof(err)), 0);
    ck_assert_str_eq(c.access_key, "TRAINKEY");
    ck_assert_str_eq(c.session_token, "traintoken");
    om_creds_clear(&c);
    /* the option beats even environment keys; config-only profiles work */
    setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
    o.aws_profile = "cfgonly";
    ck_assert_int_eq(om_creds_resolve(&o, &c, err, sizeof(err)), 0);
    ck_assert_str_eq(c.access_key, "CFGKEY");
    ck_assert_str_eq(c.region, "ap-south-1");
    ck_assert_str_eq(c.endpoint_url, "http://127.0.0.1:9000");
    om_creds_clear(&c);
    o.aws_profile = "missing";
    ck_assert_int_lt(om_creds_resolve(&o, &c, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(strstr(err, "missing"));
}
END_TEST

START_TEST(test_shared_file_locations_from_env)
{
    write_file("elsewhere", "[default]\naws_access_key_id=K2\naws_secret_access_key=S2\n", 0600);
    char path[512];
    snprintf(path, sizeof(path), "%s/elsewhere", home);
    setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
    struct om_creds_options o = {0};
    struct om_creds c;
    char err[256];
    ck_assert_int_eq(om_creds_resolve(&o, &c, err, sizeof(err)), 0);
    ck_assert_str_eq(c.access_key, "K2");
    om_creds_clear(&c);
}
END_TEST

START_TEST(test_credentials_file_passwd_format)
{
    write_file("passwd", "# comment\nGENERICKEY:genericsecret\nmybucket:BUCKETKEY:bucketsecret\n",
               0600);
    char path[512];
    snprintf(path, sizeof(path), "%s/passwd", home);
    setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
    struct om_creds_options o = {.credentials_file = path};
    struct om_creds c;
    char err[256];
    ck_assert_int_eq(om_creds_resolve(&o, &c, err, sizeof(err)), 0);
    ck_assert_str_eq(c.access_key, "GENERICKEY");
    om_creds_clear(&c);
    o.bucket = "mybucket";
    ck_assert_int_eq(om_creds_resolve(&o, &c, err, sizeof(err)), 0);
    ck_assert_str_eq(c.access_key, "BUCKETKEY");
    ck_assert_str_eq(c.secret_key, "bucketsecret");
    om_creds_clear(&c);
}
END_TEST

START_TEST(test_credentials_file_key_with_a_colon)
{
    write_file("passwd2", "AWSAccessKeyId=test:tester\nAWSSecretKey=testing\n", 0600);
    char path[512];
    snprintf(path, sizeof(path), "%s/passwd2", home);
    struct om_creds_options o = {.credentials_file = path};
    struct om_creds c;
    char err[256];
    ck_assert_int_eq(om_creds_resolve(&o, &c, err, sizeof(err)), 0);
    ck_assert_str_eq(c.access_key, "test:tester");
    ck_assert_str_eq(c.secret_key, "testing");
    om_creds_clear(&c);
}
END_TEST

START_TEST(test_credentials_file_ini_format)
{
    write_file("ini", shared, 0400);
    char path[512];
    snprintf(path, sizeof(path), "%s/ini", home);
    struct om_creds_options o = {.credentials_file = path, .aws_profile = "train"};
    struct om_creds c;
    char err[256];
    ck_assert_int_eq(om_creds_resolve(&o, &c, err, sizeof(err)), 0);
    ck_assert_str_eq(c.access_key, "TRAINKEY");
    om_creds_clear(&c);
}
END_TEST

START_TEST(test_readable_credentials_file_refused)
{
    write_file("open", "KEY:SECRET\n", 0644);
    char path[512];
    snprintf(path, sizeof(path), "%s/open", home);
    struct om_creds_options o = {.credentials_file = path};
    struct om_creds c;
    char err[256];
    ck_assert_int_eq(om_creds_resolve(&o, &c, err, sizeof(err)), -EACCES);
    ck_assert_ptr_nonnull(strstr(err, "chmod 600"));
    ck_assert_ptr_null(strstr(err, "SECRET"));
    ck_assert_ptr_null(c.access_key);
    write_file("grp", "KEY:SECRET\n", 0640);
    snprintf(path, sizeof(path), "%s/grp", home);
    ck_assert_int_eq(om_creds_resolve(&o, &c, err, sizeof(err)), -EACCES);
    snprintf(path, sizeof(path), "%s/none", home);
    ck_assert_int_eq(om_creds_resolve(&o, &c, err, sizeof(err)), -ENOENT);
    write_file("empty", "# nothing\n", 0600);
    snprintf(path, sizeof(path), "%s/empty", home);
    ck_assert_int_eq(om_creds_resolve(&o, &c, err, sizeof(err)), -EINVAL);
}
END_TEST

START_TEST(test_anonymous_and_bearer)
{
    setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
    struct om_creds_options o = {.anonymous = true};
    struct om_creds c;
    char err[256];
    ck_assert_int_eq(om_creds_resolve(&o, &c, err, sizeof(err)), 0);
    ck_assert(c.anonymous);
    ck_assert_ptr_null(c.access_key);
    om_creds_clear(&c);
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    setenv("AIS_AUTHN_TOKEN", "eyJhbGciOi", 1);
    o.anonymous = false;
    ck_assert_int_eq(om_creds_resolve(&o, &c, err, sizeof(err)), 0);
    ck_assert_str_eq(c.bearer_token, "eyJhbGciOi");
    ck_assert_ptr_null(c.access_key);
    om_creds_clear(&c);
}
END_TEST

START_TEST(test_nothing_found_says_how_to_fix)
{
    struct om_creds_options o = {0};
    struct om_creds c;
    char err[256];
    ck_assert_int_eq(om_creds_resolve(&o, &c, err, sizeof(err)), -ENOENT);
    ck_assert_ptr_nonnull(strstr(err, "AWS_ACCESS_KEY_ID"));
    ck_assert_ptr_nonnull(strstr(err, "anonymous"));
}
END_TEST

START_TEST(test_credentials_file_is_checked_on_what_is_opened)
{
    write_file("real", "KEY:SECRET\n", 0600);
    char path[512], link[512];
    snprintf(path, sizeof(path), "%s/real", home);
    snprintf(link, sizeof(link), "%s/link", home);
    ck_assert_int_eq(symlink(path, link), 0);
    struct om_creds_options o = {.credentials_file = link};
    struct om_creds c;
    char err[256];
    ck_assert_int_eq(om_creds_resolve(&o, &c, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "symbolic link"));
    /* a file of another user is refused, even with mode 0600 */
    o.credentials_file = path;
    if (getuid() == 0) {
        ck_assert_int_eq(chown(path, 4242, 4242), 0);
        ck_assert_int_eq(om_creds_resolve(&o, &c, err, sizeof(err)), -EACCES);
        ck_assert_ptr_nonnull(strstr(err, "uid 4242"));
    }
    struct stat st = {.st_mode = S_IFREG | 0600, .st_uid = 1000};
    ck_assert_int_eq(om_creds_file_check(&st, 1000), 0);
    st.st_uid = 0;
    ck_assert_int_eq(om_creds_file_check(&st, 1000), 0);
    st.st_uid = 1001;
    ck_assert_int_eq(om_creds_file_check(&st, 1000), -EPERM);
    st.st_uid = 1000;
    st.st_mode = S_IFREG | 0604;
    ck_assert_int_eq(om_creds_file_check(&st, 1000), -EACCES);
    st.st_mode = S_IFIFO | 0600;
    ck_assert_int_eq(om_creds_file_check(&st, 1000), -EINVAL);
}
END_TEST

static int parse_text(const char *text, const char *bucket, struct om_creds *c)
{
    memset(c, 0, sizeof(*c));
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    ck_assert_ptr_nonnull(f);
    int rc = om_creds_parse_stream(f, bucket, NULL, c);
    fclose(f);
    return rc;
}

START_TEST(test_empty_credential_fields_are_absent)
{
    struct om_creds c;
    ck_assert_int_eq(parse_text(":\n", NULL, &c), -EINVAL);
    om_creds_clear(&c);
    ck_assert_int_eq(parse_text("KEY:\n:SECRET\nb::\n", "b", &c), -EINVAL);
    om_creds_clear(&c);
    ck_assert_int_eq(
        parse_text("[default]\naws_access_key_id=\naws_secret_access_key=x\n", NULL, &c), -EINVAL);
    om_creds_clear(&c);
    ck_assert_int_eq(parse_text("K:S\nb:BK:BS\nK2:S2\n", "b", &c), 0);
    ck_assert_str_eq(c.access_key, "BK");
    om_creds_clear(&c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("creds");
    TCase *tc = tcase_create("chain");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_default_profile_from_shared_file);
    tcase_add_test(tc, test_environment_beats_profile);
    tcase_add_test(tc, test_aws_profile_env_and_option);
    tcase_add_test(tc, test_shared_file_locations_from_env);
    tcase_add_test(tc, test_credentials_file_passwd_format);
    tcase_add_test(tc, test_credentials_file_key_with_a_colon);
    tcase_add_test(tc, test_credentials_file_ini_format);
    tcase_add_test(tc, test_readable_credentials_file_refused);
    tcase_add_test(tc, test_credentials_file_is_checked_on_what_is_opened);
    tcase_add_test(tc, test_empty_credential_fields_are_absent);
    tcase_add_test(tc, test_anonymous_and_bearer);
    tcase_add_test(tc, test_nothing_found_says_how_to_fix);
    suite_add_tcase(s, tc);
    return om_check_run(s);
}
