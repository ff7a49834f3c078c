"""What a compiled candidate library may import: the allowlist of `harness/gates/native_inspect.py`.

Real CPU kernels need libm (and libmvec, its vector variants), OpenMP (libgomp), memory
allocation, the basics of libstdc++ (operator new/delete, exceptions, std::string, std::thread,
printing to stdout/stderr) and a few harmless libc calls (time, sleeping, `getenv` on an
environment that is allowlisted anyway). `madvise` is allowed: it advises the kernel about
memory the process already owns (transparent huge pages for a large output are a legitimate,
measurable win) and reaches nothing else. Everything else is refused at `load`, named, with the
category below, before any job loads the library; the syscall filter is what holds if a library
reaches a refused function some other way (pointer arithmetic from an allowed one, raw syscalls).
"""
from __future__ import annotations

import re

VERSION = 1  # bump when the rules change: cached verdicts are re-inspected

LIBRARIES = ("libm.so.6", "libmvec.so.1", "libgomp.so.1", "libstdc++.so.6", "libgcc_s.so.1",
             "libc.so.6", "libpthread.so.0", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1")

_MATH = """
acos asin atan atan2 acosh asinh atanh cos sin tan cosh sinh tanh sincos exp exp2 exp10 expm1
log log2 log10 log1p logb ilogb pow sqrt cbrt hypot erf erfc tgamma lgamma fmod remainder
remquo floor ceil round trunc rint nearbyint lround llround lrint llrint frexp ldexp modf fma
fmin fmax fdim fabs copysign nextafter nexttoward scalbn scalbln nan j0 j1 y0 y1
""".split()
MATH = frozenset(n + suffix for n in _MATH for suffix in ("", "f", "l"))

EXACT = frozenset("""
malloc calloc realloc free posix_memalign aligned_alloc memalign valloc malloc_usable_size
memcpy memmove memset memcmp memchr memrchr strlen strnlen strcmp strncmp strchr strrchr strstr
strcpy strncpy strcat strncat strdup strtol strtoll strtoul strtoull strtod strtof atoi atol
atof abs labs llabs qsort bsearch rand_r
printf fprintf vprintf vfprintf snprintf sprintf vsnprintf vsprintf puts putchar fputs fputc
putc fwrite fflush stdout stderr __printf_chk __fprintf_chk __sprintf_chk __snprintf_chk
__vsnprintf_chk __vfprintf_chk __memcpy_chk __memmove_chk __memset_chk __strcpy_chk
__strncpy_chk __strcat_chk __stack_chk_fail __errno_location __assert_fail abort
__cxa_finalize __gmon_start__ _ITM_registerTMCloneTable _ITM_deregisterTMCloneTable
__cxa_atexit __cxa_thread_atexit_impl __tls_get_addr __libc_single_threaded __sched_cpucount
__cxa_allocate_exception __cxa_free_exception __cxa_throw __cxa_rethrow __cxa_begin_catch
__cxa_end_catch __cxa_pure_virtual __cxa_deleted_virtual __cxa_guard_acquire
__cxa_guard_release __cxa_guard_abort __cxa_call_unexpected __gxx_personality_v0
_Unwind_Resume _Unwind_RaiseException _ZSt9terminatev
pthread_create pthread_join pthread_detach pthread_self pthread_once pthread_equal
pthread_mutex_init pthread_mutex_destroy pthread_mutex_lock pthread_mutex_trylock
pthread_mutex_unlock pthread_cond_init pthread_cond_destroy pthread_cond_wait
pthread_cond_timedwait pthread_cond_signal pthread_cond_broadcast pthread_attr_init
pthread_attr_destroy pthread_attr_setstacksize pthread_key_create pthread_key_delete
pthread_getspecific pthread_setspecific pthread_spin_lock pthread_spin_unlock
sched_yield sched_getcpu sysconf get_nprocs clock_gettime clock_getres gettimeofday time
nanosleep usleep sleep getenv madvise
""".split())

PATTERNS = (
    re.compile(r"^(GOMP|GOACC)_\w+$"),            # OpenMP runtime entry points
    re.compile(r"^omp_\w+$"),                      # OpenMP API
    re.compile(r"^_ZGV\w+$"),                      # libmvec vector math (-ffast-math)
    re.compile(r"^__\w+_finite$"),                 # old glibc's -ffast-math libm entry points
    re.compile(r"^_Zn[wa]m\w*$"),                  # operator new / new[]
    re.compile(r"^_Zd[la]Pv\w*$"),                 # operator delete / delete[]
    re.compile(r"^_ZSt\d+__throw_\w+$"),           # std::__throw_length_error and friends
    re.compile(r"^_ZTV(N10__cxxabiv1|St)\w+$"),    # vtables of type_info and std exceptions
    re.compile(r"^_ZTI\w+$"),                      # type_info objects
    re.compile(r"^_ZN?K?St7__cxx1112basic_string\w+$"),  # std::string out-of-line members
    re.compile(r"^_ZNSt6thread\w+$"), re.compile(r"^_ZTINSt6thread\w+$"),   # std::thread
    re.compile(r"^_ZNSt6chrono3_V21[02](steady|system)_clock3nowEv$"),
    re.compile(r"^_ZSt4(cout|cerr|clog)$"), re.compile(r"^_ZNSo\w+$"),       # std::ostream
    re.compile(r"^_ZNSolsE\w+$"), re.compile(r"^_ZStlsI\w+$"),
    re.compile(r"^_ZSt16__ostream_insertI\w+$"), re.compile(r"^_ZNSt8ios_base4Init\w+$"),
    re.compile(r"^_ZSt4endlI\w+$"), re.compile(r"^_ZNSt9exception\w*$"),
    re.compile(r"^_ZNKSt9exception4whatEv$"), re.compile(r"^_ZNSt(9bad_alloc|11logic_error|"
                                                         r"12length_error|13runtime_error)\w+$"),
)

# Refused symbols, by what they reach: the first matching category names the reason.
CATEGORIES = (
    (re.compile(r"^_?Py\w*$"), "the Python C API (it can rewrite the worker's own Python)"),
    (re.compile(r"^(dlopen|dlmopen|dlsym|dlvsym|dladdr\w*|dlinfo|dl_iterate_phdr|_dl_\w+|"
                r"_r_debug)$"), "dynamic loading and symbol lookup"),
    (re.compile(r"^(syscall|__syscall\w*)$"), "raw system calls"),
    (re.compile(r"^(fork|vfork|_Fork|clone\w*|exec[lv]\w*|fexecve|system|popen|pclose|"
                r"posix_spawn\w*|daemon|setsid|setpgid|kill|killpg|tgkill|ptrace|wait\w*|"
                r"prctl|unshare|setns|_exit|_Exit|exit|quick_exit|signal|sigaction|raise)$"),
     "processes and signals"),
    (re.compile(r"^(socket\w*|connect|bind|listen|accept\w*|send\w*|recv\w*|getaddrinfo|"
                r"gethostbyname\w*|shutdown|setsockopt|getsockopt)$"), "sockets"),
    (re.compile(r"^(f?open\w*|creat\w*|fdopen|freopen\w*|tmpfile\w*|mkstemp\w*|mkdtemp|"
                r"opendir|fdopendir|readdir\w*|closedir|scandir\w*|mkdir\w*|rmdir|unlink\w*|"
                r"remove|rename\w*|link\w*|symlink\w*|readlink\w*|mknod\w*|mkfifo\w*|chmod\w*|"
                r"fchmod\w*|chown\w*|truncate\w*|ftruncate\w*|utime\w*|getcwd|chdir|fchdir|"
                r"realpath|stat\w*|lstat\w*|fstat\w*|__x?stat\w*|access|faccessat|fread|fgets|"
                r"fgetc|getc|fscanf|fclose|fseek\w*|ftell\w*|read|write|pread\w*|pwrite\w*|close|"
                r"dup\d?|pipe\d?|fcntl\w*|ioctl|mmap\w*|munmap|mprotect|memfd_\w+|shm_\w+|"
                r"sendfile\w*)$"), "the file system and raw descriptors"),
    (re.compile(r"basic_(i|o)?fstream|basic_filebuf|filesystem"), "the file system"),
)


def allowed(name: str) -> bool:
    return name in EXACT or name in MATH or any(p.match(name) for p in PATTERNS)


def category(name: str) -> str:
    for pattern, what in CATEGORIES:
        if pattern.search(name):
            return what
    return "nothing a kernel needs (outside the allowlist: libm, OpenMP, memory, libstdc++ basics)"
