/* Arguments a program gets that its command line never shows (servelab/serving/argv_tail.py).
 *
 * Loaded with LD_PRELOAD, this wraps the program's main(): the words of the environment variable
 * LAB_ARGV_TAIL (one per line) are appended to the argv that main() receives, in a new array.
 * /proc/<pid>/cmdline, which every local user can read, shows the memory the kernel wrote at
 * exec, which holds only the words the program was started with; the tail lies in the
 * environment, which /proc/<pid>/environ shows to the process's owner and root only, and this
 * overwrites it there before main() runs. For a secret that a program takes on its command line
 * only (perf_analyzer's -H Header:Value).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#define TAIL "LAB_ARGV_TAIL"

typedef int (*main_fn)(int, char **, char **);
typedef int (*start_fn)(main_fn, int, char **, void (*)(void), void (*)(void), void (*)(void),
                        void *);

static main_fn real_main;

static int main_with_tail(int argc, char **argv, char **envp) {
    char *tail = getenv(TAIL);
    unsetenv("LD_PRELOAD"); /* nothing the program starts loads this again */
    if (tail == NULL) return real_main(argc, argv, envp);
    size_t words = 1;
    for (const char *c = tail; *c; c++) words += (*c == '\n');
    char *copy = strdup(tail);
    char **args = calloc((size_t)argc + words + 1, sizeof(char *));
    if (copy == NULL || args == NULL) abort();
    memcpy(args, argv, (size_t)argc * sizeof(char *));
    int count = argc;
    char *save = NULL;
    for (char *word = strtok_r(copy, "\n", &save); word; word = strtok_r(NULL, "\n", &save))
        args[count++] = word;
    args[count] = NULL;
    memset(tail, 'x', strlen(tail)); /* the environment's own bytes: /proc/<pid>/environ */
    unsetenv(TAIL);
    return real_main(count, args, envp);
}

int __libc_start_main(main_fn main, int argc, char **argv, void (*init)(void),
                      void (*fini)(void), void (*rtld_fini)(void), void *stack_end) {
    start_fn next = (start_fn)dlsym(RTLD_NEXT, "__libc_start_main");
    if (next == NULL) abort();
    real_main = main;
    return next(main_with_tail, argc, argv, init, fini, rtld_fini, stack_end);
}
