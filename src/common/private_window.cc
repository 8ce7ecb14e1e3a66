#include "common/private_window.h"

#include <sys/prctl.h>

#include <mutex>

namespace deputy {
namespace {

// Windows of several threads overlap: the process is dumpable again only
// when the last one ends, and only if it was when the first began.
std::mutex g_mutex;
int g_open = 0;
bool g_restore = false;

}  // namespace

PrivateWindow::PrivateWindow() {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_open++ == 0) {
        g_restore = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 1;
        if (g_restore) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
}

PrivateWindow::~PrivateWindow() {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (--g_open == 0 && g_restore) prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
}

}  // namespace deputy
