//! The seccomp filter of a container that is not privileged: an allowlist
//! with the effect of dockerd's default profile (moby's
//! `profiles/seccomp/default.json`). A system call it does not name is
//! refused with EPERM; some are allowed only on an architecture, only to a
//! container holding a capability (`--cap-add SYS_ADMIN` allows `mount`,
//! `unshare`, `setns` ...; `SYS_PTRACE` allows `kcmp`, `pidfd_getfd` ...),
//! or only with certain arguments (`socket` but for `AF_ALG` and
//! `AF_VSOCK`, `personality` for five personas, `clone` without namespace
//! flags unless the container holds `CAP_SYS_ADMIN`). runc leaves out the
//! names its libseccomp does not know, so names from newer kernels cost
//! nothing on older ones.
//!
//! The kernel is assumed to be 4.8 or newer (dockerd allows `ptrace` and
//! `process_vm_readv`/`writev` from there on, when the check that closed
//! the seccomp bypass through ptrace landed).

use crate::error::AdapterError;
use oci_spec::runtime::{
    Arch, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArgBuilder, LinuxSeccompBuilder,
    LinuxSeccompOperator, LinuxSyscall, LinuxSyscallBuilder,
};

const EPERM: u32 = 1;
const ENOSYS: u32 = 38;
const AF_ALG: u64 = 38;
const AF_VSOCK: u64 = 40;
/// CLONE_NEWNS | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWCGROUP.
const CLONE_NAMESPACE_FLAGS: u64 =
    0x0002_0000 | 0x0400_0000 | 0x0800_0000 | 0x1000_0000 | 0x2000_0000 | 0x4000_0000 | 0x0200_0000;
/// The personas a container may switch to: the default, `PER_LINUX32`,
/// `UNAME26`, both, and the query (0xffffffff).
const PERSONAS: [u64; 5] = [0x0, 0x0008, 0x2_0000, 0x2_0008, 0xffff_ffff];

/// Allowed to every container.
const ALLOWED: [&str; 361] = [
    "accept",
    "accept4",
    "access",
    "adjtimex",
    "alarm",
    "bind",
    "brk",
    "cachestat",
    "capget",
    "capset",
    "chdir",
    "chmod",
    "chown",
    "chown32",
    "clock_adjtime",
    "clock_adjtime64",
    "clock_getres",
    "clock_getres_time64",
    "clock_gettime",
    "clock_gettime64",
    "clock_nanosleep",
    "clock_nanosleep_time64",
    "close",
    "close_range",
    "connect",
    "copy_file_range",
    "creat",
    "dup",
    "dup2",
    "dup3",
    "epoll_create",
    "epoll_create1",
    "epoll_ctl",
    "epoll_ctl_old",
    "epoll_pwait",
    "epoll_pwait2",
    "epoll_wait",
    "epoll_wait_old",
    "eventfd",
    "eventfd2",
    "execve",
    "execveat",
    "exit",
    "exit_group",
    "faccessat",
    "faccessat2",
    "fadvise64",
    "fadvise64_64",
    "fallocate",
    "fanotify_mark",
    "fchdir",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "fchown",
    "fchown32",
    "fchownat",
    "fcntl",
    "fcntl64",
    "fdatasync",
    "fgetxattr",
    "flistxattr",
    "flock",
    "fork",
    "fremovexattr",
    "fsetxattr",
    "fstat",
    "fstat64",
    "fstatat64",
    "fstatfs",
    "fstatfs64",
    "fsync",
    "ftruncate",
    "ftruncate64",
    "futex",
    "futex_requeue",
    "futex_time64",
    "futex_wait",
    "futex_waitv",
    "futex_wake",
    "futimesat",
    "getcpu",
    "getcwd",
    "getdents",
    "getdents64",
    "getegid",
    "getegid32",
    "geteuid",
    "geteuid32",
    "getgid",
    "getgid32",
    "getgroups",
    "getgroups32",
    "getitimer",
    "getpeername",
    "getpgid",
    "getpgrp",
    "getpid",
    "getppid",
    "getpriority",
    "getrandom",
    "getresgid",
    "getresgid32",
    "getresuid",
    "getresuid32",
    "getrlimit",
    "get_robust_list",
    "getrusage",
    "getsid",
    "getsockname",
    "getsockopt",
    "get_thread_area",
    "gettid",
    "gettimeofday",
    "getuid",
    "getuid32",
    "getxattr",
    "getxattrat",
    "inotify_add_watch",
    "inotify_init",
    "inotify_init1",
    "inotify_rm_watch",
    "io_cancel",
    "ioctl",
    "io_destroy",
    "io_getevents",
    "io_pgetevents",
    "io_pgetevents_time64",
    "ioprio_get",
    "ioprio_set",
    "io_setup",
    "io_submit",
    "ipc",
    "kill",
    "landlock_add_rule",
    "landlock_create_ruleset",
    "landlock_restrict_self",
    "lchown",
    "lchown32",
    "lgetxattr",
    "link",
    "linkat",
    "listen",
    "listmount",
    "listxattr",
    "listxattrat",
    "llistxattr",
    "_llseek",
    "lremovexattr",
    "lseek",
    "lsetxattr",
    "lstat",
    "lstat64",
    "madvise",
    "map_shadow_stack",
    "membarrier",
    "memfd_create",
    "memfd_secret",
    "mincore",
    "mkdir",
    "mkdirat",
    "mknod",
    "mknodat",
    "mlock",
    "mlock2",
    "mlockall",
    "mmap",
    "mmap2",
    "mprotect",
    "mq_getsetattr",
    "mq_notify",
    "mq_open",
    "mq_timedreceive",
    "mq_timedreceive_time64",
    "mq_timedsend",
    "mq_timedsend_time64",
    "mq_unlink",
    "mremap",
    "mseal",
    "msgctl",
    "msgget",
    "msgrcv",
    "msgsnd",
    "msync",
    "munlock",
    "munlockall",
    "munmap",
    "name_to_handle_at",
    "nanosleep",
    "newfstatat",
    "_newselect",
    "open",
    "openat",
    "openat2",
    "pause",
    "pidfd_open",
    "pidfd_send_signal",
    "pipe",
    "pipe2",
    "pkey_alloc",
    "pkey_free",
    "pkey_mprotect",
    "poll",
    "ppoll",
    "ppoll_time64",
    "prctl",
    "pread64",
    "preadv",
    "preadv2",
    "prlimit64",
    "process_mrelease",
    "pselect6",
    "pselect6_time64",
    "pwrite64",
    "pwritev",
    "pwritev2",
    "read",
    "readahead",
    "readlink",
    "readlinkat",
    "readv",
    "recv",
    "recvfrom",
    "recvmmsg",
    "recvmmsg_time64",
    "recvmsg",
    "remap_file_pages",
    "removexattr",
    "removexattrat",
    "rename",
    "renameat",
    "renameat2",
    "restart_syscall",
    "riscv_hwprobe",
    "rmdir",
    "rseq",
    "rt_sigaction",
    "rt_sigpending",
    "rt_sigprocmask",
    "rt_sigqueueinfo",
    "rt_sigreturn",
    "rt_sigsuspend",
    "rt_sigtimedwait",
    "rt_sigtimedwait_time64",
    "rt_tgsigqueueinfo",
    "sched_getaffinity",
    "sched_getattr",
    "sched_getparam",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "sched_getscheduler",
    "sched_rr_get_interval",
    "sched_rr_get_interval_time64",
    "sched_setaffinity",
    "sched_setattr",
    "sched_setparam",
    "sched_setscheduler",
    "sched_yield",
    "seccomp",
    "select",
    "semctl",
    "semget",
    "semop",
    "semtimedop",
    "semtimedop_time64",
    "send",
    "sendfile",
    "sendfile64",
    "sendmmsg",
    "sendmsg",
    "sendto",
    "setfsgid",
    "setfsgid32",
    "setfsuid",
    "setfsuid32",
    "setgid",
    "setgid32",
    "setgroups",
    "setgroups32",
    "setitimer",
    "setpgid",
    "setpriority",
    "setregid",
    "setregid32",
    "setresgid",
    "setresgid32",
    "setresuid",
    "setresuid32",
    "setreuid",
    "setreuid32",
    "setrlimit",
    "set_robust_list",
    "setsid",
    "setsockopt",
    "set_thread_area",
    "set_tid_address",
    "setuid",
    "setuid32",
    "setxattr",
    "setxattrat",
    "shmat",
    "shmctl",
    "shmdt",
    "shmget",
    "shutdown",
    "sigaltstack",
    "signalfd",
    "signalfd4",
    "sigprocmask",
    "sigreturn",
    "socketcall",
    "socketpair",
    "splice",
    "stat",
    "stat64",
    "statfs",
    "statfs64",
    "statmount",
    "statx",
    "symlink",
    "symlinkat",
    "sync",
    "sync_file_range",
    "syncfs",
    "sysinfo",
    "tee",
    "tgkill",
    "time",
    "timer_create",
    "timer_delete",
    "timer_getoverrun",
    "timer_gettime",
    "timer_gettime64",
    "timer_settime",
    "timer_settime64",
    "timerfd_create",
    "timerfd_gettime",
    "timerfd_gettime64",
    "timerfd_settime",
    "timerfd_settime64",
    "times",
    "tkill",
    "truncate",
    "truncate64",
    "ugetrlimit",
    "umask",
    "uname",
    "unlink",
    "unlinkat",
    "uretprobe",
    "utime",
    "utimensat",
    "utimensat_time64",
    "utimes",
    "vfork",
    "vmsplice",
    "wait4",
    "waitid",
    "waitpid",
    "write",
    "writev",
];

/// Allowed only to a container holding the capability.
const BY_CAPABILITY: [(&str, &[&str]); 14] = [
    ("CAP_DAC_READ_SEARCH", &["open_by_handle_at"]),
    (
        "CAP_SYS_ADMIN",
        &[
            "bpf",
            "clone",
            "clone3",
            "fanotify_init",
            "fsconfig",
            "fsmount",
            "fsopen",
            "fspick",
            "lookup_dcookie",
            "lsm_get_self_attr",
            "lsm_list_modules",
            "lsm_set_self_attr",
            "mount",
            "mount_setattr",
            "move_mount",
            "open_tree",
            "perf_event_open",
            "quotactl",
            "quotactl_fd",
            "setdomainname",
            "sethostname",
            "setns",
            "syslog",
            "umount",
            "umount2",
            "unshare",
        ],
    ),
    ("CAP_SYS_BOOT", &["reboot"]),
    ("CAP_SYS_CHROOT", &["chroot"]),
    (
        "CAP_SYS_MODULE",
        &["delete_module", "init_module", "finit_module"],
    ),
    ("CAP_SYS_PACCT", &["acct"]),
    (
        "CAP_SYS_PTRACE",
        &[
            "kcmp",
            "pidfd_getfd",
            "process_madvise",
            "process_vm_readv",
            "process_vm_writev",
            "ptrace",
        ],
    ),
    ("CAP_SYS_RAWIO", &["iopl", "ioperm"]),
    (
        "CAP_SYS_TIME",
        &["settimeofday", "stime", "clock_settime", "clock_settime64"],
    ),
    ("CAP_SYS_TTY_CONFIG", &["vhangup"]),
    (
        "CAP_SYS_NICE",
        &[
            "get_mempolicy",
            "mbind",
            "set_mempolicy",
            "set_mempolicy_home_node",
        ],
    ),
    ("CAP_SYSLOG", &["syslog"]),
    ("CAP_BPF", &["bpf"]),
    ("CAP_PERFMON", &["perf_event_open"]),
];

/// The filter for a container holding `capabilities` (full names,
/// `CAP_...`), on the architecture holdfastd was built for.
pub(crate) fn profile(capabilities: &[&str]) -> Result<LinuxSeccomp, AdapterError> {
    profile_for(std::env::consts::ARCH, capabilities)
}

fn profile_for(arch: &str, capabilities: &[&str]) -> Result<LinuxSeccomp, AdapterError> {
    let holds = |cap: &str| capabilities.contains(&cap);
    let mut rules = vec![
        allow(&ALLOWED, vec![])?,
        allow(&["process_vm_readv", "process_vm_writev", "ptrace"], vec![])?,
        allow(
            &["socket"],
            vec![arg(0, AF_ALG, LinuxSeccompOperator::ScmpCmpLt)?],
        )?,
        allow(
            &["socket"],
            vec![arg(0, AF_ALG + 1, LinuxSeccompOperator::ScmpCmpEq)?],
        )?,
        allow(
            &["socket"],
            vec![arg(0, AF_VSOCK, LinuxSeccompOperator::ScmpCmpGt)?],
        )?,
    ];
    for persona in PERSONAS {
        rules.push(allow(
            &["personality"],
            vec![arg(0, persona, LinuxSeccompOperator::ScmpCmpEq)?],
        )?);
    }
    let architectures = match arch {
        "aarch64" => {
            rules.push(allow(
                &[
                    "arm_fadvise64_64",
                    "arm_sync_file_range",
                    "sync_file_range2",
                    "breakpoint",
                    "cacheflush",
                    "set_tls",
                ],
                vec![],
            )?);
            vec![Arch::ScmpArchAarch64, Arch::ScmpArchArm]
        }
        _ => {
            rules.push(allow(&["arch_prctl", "modify_ldt"], vec![])?);
            vec![Arch::ScmpArchX86_64, Arch::ScmpArchX86, Arch::ScmpArchX32]
        }
    };
    for (cap, names) in BY_CAPABILITY {
        if holds(cap) {
            rules.push(allow(names, vec![])?);
        }
    }
    if !holds("CAP_SYS_ADMIN") {
        // A clone that makes no namespace; clone3's flags are behind a
        // pointer a filter cannot read, so it fails as if the kernel lacked
        // it and the C library falls back to clone.
        rules.push(allow(
            &["clone"],
            vec![
                LinuxSeccompArgBuilder::default()
                    .index(0usize)
                    .value(CLONE_NAMESPACE_FLAGS)
                    .value_two(0u64)
                    .op(LinuxSeccompOperator::ScmpCmpMaskedEq)
                    .build()
                    .map_err(invalid)?,
            ],
        )?);
        rules.push(
            LinuxSyscallBuilder::default()
                .names(vec!["clone3".to_owned()])
                .action(LinuxSeccompAction::ScmpActErrno)
                .errno_ret(ENOSYS)
                .build()
                .map_err(invalid)?,
        );
    }
    LinuxSeccompBuilder::default()
        .default_action(LinuxSeccompAction::ScmpActErrno)
        .default_errno_ret(EPERM)
        .architectures(architectures)
        .syscalls(rules)
        .build()
        .map_err(invalid)
}

fn allow(
    names: &[&str],
    args: Vec<oci_spec::runtime::LinuxSeccompArg>,
) -> Result<LinuxSyscall, AdapterError> {
    let mut builder = LinuxSyscallBuilder::default()
        .names(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
        .action(LinuxSeccompAction::ScmpActAllow);
    if !args.is_empty() {
        builder = builder.args(args);
    }
    builder.build().map_err(invalid)
}

fn arg(
    index: usize,
    value: u64,
    op: LinuxSeccompOperator,
) -> Result<oci_spec::runtime::LinuxSeccompArg, AdapterError> {
    LinuxSeccompArgBuilder::default()
        .index(index)
        .value(value)
        .op(op)
        .build()
        .map_err(invalid)
}

fn invalid(e: oci_spec::OciSpecError) -> AdapterError {
    AdapterError::Invalid(format!("seccomp profile: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether a call `name` with first argument `arg0` passes the filter,
    /// read as runc's libseccomp reads it: the first rule that matches.
    fn allowed(p: &LinuxSeccomp, name: &str, arg0: u64) -> bool {
        let matches = |r: &&LinuxSyscall| {
            r.names().iter().any(|n| n == name)
                && r.args().iter().flatten().all(|a| match a.op() {
                    LinuxSeccompOperator::ScmpCmpEq => arg0 == a.value(),
                    LinuxSeccompOperator::ScmpCmpLt => arg0 < a.value(),
                    LinuxSeccompOperator::ScmpCmpGt => arg0 > a.value(),
                    LinuxSeccompOperator::ScmpCmpMaskedEq => {
                        arg0 & a.value() == a.value_two().unwrap_or(0)
                    }
                    other => panic!("operator {other:?} not modelled"),
                })
        };
        let rules = p.syscalls().as_deref().unwrap_or_default();
        rules
            .iter()
            .filter(matches)
            .any(|r| r.action() == LinuxSeccompAction::ScmpActAllow)
    }

    const DEFAULT_CAPS: [&str; 3] = ["CAP_CHOWN", "CAP_NET_RAW", "CAP_SYS_CHROOT"];

    #[test]
    fn what_is_not_listed_is_refused_with_eperm() {
        let p = profile_for("x86_64", &DEFAULT_CAPS).expect("profile");
        assert_eq!(p.default_action(), LinuxSeccompAction::ScmpActErrno);
        assert_eq!(p.default_errno_ret(), Some(EPERM));
        for name in [
            "read",
            "openat",
            "execve",
            "chown",
            "setuid",
            "arch_prctl",
            "chroot",
        ] {
            assert!(allowed(&p, name, 0), "{name} must be allowed");
        }
        for name in [
            "mount",
            "unshare",
            "setns",
            "keyctl",
            "add_key",
            "bpf",
            "init_module",
            "kcmp",
            "clock_settime",
            "userfaultfd",
            "io_uring_setup",
            "syslog",
            "reboot",
            "open_by_handle_at",
            "get_mempolicy",
            "no_such_call",
        ] {
            assert!(!allowed(&p, name, 0), "{name} must be refused");
        }
    }

    #[test]
    fn arguments_narrow_socket_personality_and_clone() {
        let p = profile_for("x86_64", &DEFAULT_CAPS).expect("profile");
        assert!(allowed(&p, "socket", 2) && allowed(&p, "socket", 39) && allowed(&p, "socket", 44));
        assert!(!allowed(&p, "socket", AF_ALG) && !allowed(&p, "socket", AF_VSOCK));
        assert!(allowed(&p, "personality", 0x0008) && allowed(&p, "personality", 0xffff_ffff));
        // ADDR_NO_RANDOMIZE
        assert!(!allowed(&p, "personality", 0x0040_0000));
        // a thread (CLONE_VM | CLONE_THREAD ...) yes, a new user namespace no
        assert!(allowed(&p, "clone", 0x0001_0f00));
        assert!(!allowed(&p, "clone", 0x1000_0000 | 0x11));
        assert!(!allowed(&p, "clone3", 0));
    }

    #[test]
    fn capabilities_unlock_what_dockerd_unlocks() {
        let admin = profile_for("x86_64", &["CAP_SYS_ADMIN"]).expect("profile");
        for name in [
            "mount",
            "umount2",
            "unshare",
            "setns",
            "clone3",
            "sethostname",
        ] {
            assert!(allowed(&admin, name, 0), "{name} with CAP_SYS_ADMIN");
        }
        assert!(allowed(&admin, "clone", 0x1000_0000));
        let ptrace = profile_for("x86_64", &["CAP_SYS_PTRACE"]).expect("profile");
        assert!(allowed(&ptrace, "kcmp", 0) && allowed(&ptrace, "pidfd_getfd", 0));
        assert!(!allowed(&ptrace, "mount", 0));
        let time = profile_for("x86_64", &["CAP_SYS_TIME"]).expect("profile");
        assert!(allowed(&time, "clock_settime", 0));
        let module = profile_for("x86_64", &["CAP_SYS_MODULE"]).expect("profile");
        assert!(allowed(&module, "finit_module", 0));
    }

    #[test]
    fn the_architecture_decides_its_own_calls() {
        let x86 = profile_for("x86_64", &[]).expect("profile");
        assert!(allowed(&x86, "modify_ldt", 0) && !allowed(&x86, "set_tls", 0));
        assert_eq!(
            x86.architectures().as_deref(),
            Some(&[Arch::ScmpArchX86_64, Arch::ScmpArchX86, Arch::ScmpArchX32][..])
        );
        let arm = profile_for("aarch64", &[]).expect("profile");
        assert!(allowed(&arm, "set_tls", 0) && !allowed(&arm, "arch_prctl", 0));
    }
}
