//! The mount namespace that lets a program change the workspace's top
//! level while `runs/`, `bridge/`, `.planrun/` and the other protected
//! entries stay out of its reach. Landlock grants a folder with everything
//! beneath it, so a rule on the workspace would also open those folders:
//! here they are covered first, in a mount namespace of the calling
//! thread's own (the program inherits it), by an empty read-only file
//! system (`hide`) or by a read-only mount of themselves (`.git`). Then
//! Landlock, applied after this, forbids the program any change of the
//! mounts (`mount`, `umount`, `pivot_root` are refused to a thread under
//! Landlock), so it can neither uncover them nor move them.

use std::path::Path;

use rustix::fs::StatVfsMountFlags;
use rustix::mount::{MountFlags, MountPropagationFlags};
use rustix::thread::UnshareFlags;

use super::restrict::Failure;
use super::spec::Isolation;

/// Enters a new mount namespace (and a user namespace first when
/// `isolation.user`; the calling process must then have one thread) and
/// covers the protected entries. An error leaves the thread unusable for
/// the program: the caller must not start it.
pub fn isolate(isolation: &Isolation) -> Result<(), Failure> {
    if isolation.user {
        let (uid, gid) = (rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw());
        unshare(UnshareFlags::NEWUSER | UnshareFlags::NEWNS)?;
        // The same user and group inside as outside (files keep their
        // owner), and no `setgroups` (required before a `gid_map`).
        std::fs::write("/proc/self/setgroups", "deny")?;
        std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
        std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    } else {
        unshare(UnshareFlags::NEWNS)?;
    }
    // Nothing done here reaches the namespace planrun runs in.
    rustix::mount::mount_change("/", MountPropagationFlags::PRIVATE | MountPropagationFlags::REC)?;
    for path in &isolation.hide {
        if path.is_dir() {
            let flags = MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
            rustix::mount::mount("planrun-hidden", path, "tmpfs", flags, c"size=4k,mode=0555")?;
        } else {
            rustix::mount::mount_bind("/dev/null", path)?;
            read_only(path)?;
        }
    }
    for path in &isolation.read_only {
        rustix::mount::mount_bind_recursive(path, path)?;
        read_only(path)?;
    }
    Ok(())
}

/// Makes the bind mount at `path` read-only, keeping the flags of the
/// mount it came from (a user namespace may not clear them).
fn read_only(path: &Path) -> Result<(), Failure> {
    let kept = rustix::fs::statvfs(path)?.f_flag;
    let mut flags = MountFlags::BIND | MountFlags::RDONLY;
    for (from, to) in [
        (StatVfsMountFlags::NOSUID, MountFlags::NOSUID),
        (StatVfsMountFlags::NODEV, MountFlags::NODEV),
        (StatVfsMountFlags::NOEXEC, MountFlags::NOEXEC),
        (StatVfsMountFlags::NOATIME, MountFlags::NOATIME),
        (StatVfsMountFlags::NODIRATIME, MountFlags::NODIRATIME),
        (StatVfsMountFlags::RELATIME, MountFlags::RELATIME),
    ] {
        if kept.contains(from) {
            flags |= to;
        }
    }
    rustix::mount::mount_remount(path, flags, "")?;
    Ok(())
}

/// `unshare(2)` for namespaces only. rustix marks its safe `unshare`
/// deprecated because `CLONE_FILES` can leave a thread unable to use
/// descriptors of others; namespaces (`CLONE_NEWNS` implies `CLONE_FS`:
/// the thread's own working directory and root, nothing else) share no
/// descriptor table, so the call is sound here.
#[expect(deprecated, reason = "sound for namespace flags, see above")]
fn unshare(flags: UnshareFlags) -> Result<(), Failure> {
    rustix::thread::unshare(flags)?;
    Ok(())
}
