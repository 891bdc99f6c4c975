//! Files the proxy keeps in its state directory (`state_dir`): the listener
//! certificate and key, the drop-in CA and its leaves, the pins journal.
//!
//! Whoever else can write to that directory must not be able to hang the
//! proxy or make it write elsewhere:
//! - a read opens without blocking (a FIFO would wait for a writer forever)
//!   and takes only a regular file (a symlink to one is fine: operators point
//!   `gemini-cert.pem` at a certificate kept elsewhere); anything else is an
//!   error naming the path;
//! - a whole-file write goes to a fresh name created exclusively (`O_EXCL`,
//!   which never follows a symlink) and is renamed over the old one, which
//!   replaces a symlink rather than writing through it;
//! - an append opens with `O_NOFOLLOW` and takes only a regular file.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(unix)]
use std::os::unix::fs::OpenOptionsExt;

/// Callers name the path; the error says what is wrong with it.
fn not_regular(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("it is {what}, not a regular file (the state directory holds only the proxy's own files: remove it)"),
    )
}

/// What a file type is, in words, for the error.
fn kind(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_block_device() || t.is_char_device() {
            return "a device";
        }
    }
    if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symlink"
    } else {
        "not a plain file"
    }
}

/// Opens `path` for reading without blocking, if it is a regular file.
pub fn open(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    options.custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits());
    let file = options.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular(kind(&meta)));
    }
    Ok(file)
}

/// The whole of `path` (at most `cap` bytes; more is an error).
pub fn read(path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open(path)?.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is over {cap} bytes", path.display()),
        ));
    }
    Ok(bytes)
}

/// `read` as text.
pub fn read_to_string(path: &Path, cap: u64) -> io::Result<String> {
    String::from_utf8(read(path, cap)?).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is not UTF-8", path.display()),
        )
    })
}

/// `read_to_string`, with a missing file as `None`.
pub fn read_optional(path: &Path, cap: u64) -> io::Result<Option<String>> {
    match read_to_string(path, cap) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The most bytes a key, certificate or name list is read.
pub const SMALL_FILE: u64 = 1024 * 1024;

/// The file in the state directory where `run` writes each listener's key
/// and address, one per line (`listen.metrics 127.0.0.1:9770`): for scripts,
/// and for `robots-proxy status` to find the admin listener.
pub const LISTENING: &str = "listening";

/// A fresh name beside `path`, unique in this process and across processes.
fn temp_name(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Writes `path` whole: a fresh file (`mode` on unix), synced, renamed over
/// the old one. A symlink at `path` is replaced, never followed.
pub fn write(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    write_with(path, mode, |out| out.write_all(bytes))
}

/// `write` without waiting for the disk, for files that can be made again
/// and are written while a request waits (drop-in leaves): a crash may lose
/// one, which is then issued anew.
pub fn write_unsynced(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    write_file(path, mode, false, |out| out.write_all(bytes))
}

/// `write`, with the content written by `fill`.
pub fn write_with(
    path: &Path,
    mode: u32,
    fill: impl FnOnce(&mut io::BufWriter<&File>) -> io::Result<()>,
) -> io::Result<()> {
    write_file(path, mode, true, fill)
}

fn write_file(
    path: &Path,
    mode: u32,
    sync: bool,
    fill: impl FnOnce(&mut io::BufWriter<&File>) -> io::Result<()>,
) -> io::Result<()> {
    let tmp = temp_name(path);
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    options.mode(mode);
    #[cfg(not(unix))]
    let _ = mode;
    let file = options.open(&tmp)?;
    let written = (|| {
        let mut out = io::BufWriter::new(&file);
        fill(&mut out)?;
        out.flush()?;
        drop(out);
        if sync {
            file.sync_all()?;
        }
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Opens `path` to append to, if it is a regular file and not a symlink.
pub fn append(path: &Path) -> io::Result<File> {
    // Looked at first for a clear error; the open's flags are what hold if
    // the file is swapped in between (a symlink fails with ELOOP, a FIFO
    // without a reader with ENXIO, rather than blocking).
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.is_file() {
            return Err(not_regular(kind(&meta)));
        }
    }
    let mut options = OpenOptions::new();
    options.append(true);
    #[cfg(unix)]
    options.custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits());
    let file = options.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular(kind(&meta)));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rp-state-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let d = dir("fifo");
        let path = d.join("pins");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = read(&path, 100).unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        let e = append(&path).unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_directory_is_refused() {
        let d = dir("dir");
        std::fs::create_dir(d.join("gemini-key.pem")).unwrap();
        let e = read(&d.join("gemini-key.pem"), 100).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn writes_replace_a_symlink_and_leave_its_target_alone() {
        let d = dir("symlink");
        let victim = d.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let path = d.join("pins");
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        // Planted temp names are not used either.
        std::os::unix::fs::symlink(&victim, d.join("pins.tmp")).unwrap();
        write(&path, b"new", 0o600).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
        // No temp file is left behind.
        let left: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 3, "{left:?}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn appends_refuse_a_symlink() {
        let d = dir("append");
        let victim = d.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        std::os::unix::fs::symlink(&victim, d.join("pins")).unwrap();
        let e = append(&d.join("pins")).unwrap_err();
        assert!(e.to_string().contains("a symlink"), "{e}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn reads_are_capped_and_follow_a_symlink_to_a_file() {
        let d = dir("cap");
        std::fs::write(d.join("real"), b"0123456789").unwrap();
        std::os::unix::fs::symlink(d.join("real"), d.join("link")).unwrap();
        assert_eq!(read(&d.join("link"), 10).unwrap(), b"0123456789");
        assert!(read(&d.join("real"), 9).is_err());
        let _ = std::fs::remove_dir_all(&d);
    }
}
