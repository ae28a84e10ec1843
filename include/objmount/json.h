/* A small JSON writer over om_buf, for objmountctl's --json output and the
 * daemon's "status json" / "stats json" answers. Field names are documented
 * in doc/json.md and stay stable. */
#ifndef OBJMOUNT_JSON_H
#define OBJMOUNT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "objmount/util.h"

/* Append s as a JSON string (quotes, escapes; bytes that are not valid UTF-8
 * become U+FFFD) to b. Returns 0 or -ENOMEM. */
int om_json_escape(struct om_buf *b, const char *s);

#define OM_JSON_MAX_DEPTH 8

/* A writer appending to b. The first error (-ENOMEM, or -EINVAL for nesting
 * deeper than OM_JSON_MAX_DEPTH or an unbalanced end) sticks in rc; later
 * calls do nothing. key is the member name inside an object, NULL inside an
 * array or at the top. */
struct om_json {
    struct om_buf *b;
    int depth;
    bool has_item[OM_JSON_MAX_DEPTH + 1];
    int rc;
};

void om_json_init(struct om_json *j, struct om_buf *b);
void om_json_object(struct om_json *j, const char *key);
void om_json_array(struct om_json *j, const char *key);
/* Close the innermost object ('}') or array (']'). */
void om_json_end(struct om_json *j, char close);
void om_json_str(struct om_json *j, const char *key, const char *v); /* NULL: null */
void om_json_u64(struct om_json *j, const char *key, uint64_t v);
void om_json_i64(struct om_json *j, const char *key, int64_t v);
void om_json_double(struct om_json *j, const char *key, double v);
void om_json_bool(struct om_json *j, const char *key, bool v);
/* A value that is already JSON text (an answer of the daemon), inserted as is. */
void om_json_raw(struct om_json *j, const char *key, const char *json);

#endif
