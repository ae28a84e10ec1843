/* S3 <Error> documents, other small documents (find_text), and
 * ListMultipartUploads pages. */
#include "fuzz.h"
#include "objmount/xml.h"

static int on_upload(void *ud, const struct om_upload_entry *e)
{
    size_t *n = ud;
    *n += strlen(e->key) + strlen(e->upload_id);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int init;
    if (!init) {
        om_xml_init();
        init = 1;
    }
    const char *body = (const char *)data;
    char code[64], msg[256], rid[96];
    (void)om_xml_parse_error(body, size, code, sizeof(code), msg, sizeof(msg), rid, sizeof(rid));
    free(om_xml_find_text(body, size, "UploadId"));
    size_t n = 0;
    bool truncated = false;
    char *nk = NULL, *nu = NULL;
    (void)om_xml_parse_uploads(body, size, on_upload, &n, &truncated, &nk, &nu);
    free(nk);
    free(nu);
    return 0;
}
