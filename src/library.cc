// The shared library's own translation unit. Everything else comes from
// deputy_core (linked whole); this file exists so the shared target has a
// source of its own and a place for library-wide definitions.
#include <deputy/log.h>
