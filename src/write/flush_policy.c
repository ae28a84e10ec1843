/* What a FLUSH does (see include/objmount/flush_policy.h). */
#include "objmount/flush_policy.h"

enum om_flush_action om_flush_decide(const struct om_flush_facts *f)
{
    if (f->discarded)
        return OM_FLUSH_NOTHING;
    if (f->write_error)
        return OM_FLUSH_ERROR;
    if (!f->dirty)
        return OM_FLUSH_NOTHING;
    if (f->flusher == OM_FLUSHER_OTHER)
        return OM_FLUSH_DEFER;
    if (f->trunc_only)
        return OM_FLUSH_DEFER;
    return OM_FLUSH_COMMIT;
}

const char *om_flush_action_name(enum om_flush_action a)
{
    switch (a) {
    case OM_FLUSH_NOTHING:
        return "nothing";
    case OM_FLUSH_ERROR:
        return "error";
    case OM_FLUSH_DEFER:
        return "defer";
    case OM_FLUSH_COMMIT:
        return "commit";
    }
    return "?";
}
