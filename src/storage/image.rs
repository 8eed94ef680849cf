//! [`Images`]: structures a checkpoint writes whole, for the ones that live in RAM and change
//! everywhere between two checkpoints (the BFS-with-snapshots engine's two levels, the
//! snapshots store's pool of remembered states), where an append-only log of changes would
//! be no smaller than the structure.
//!
//! Each checkpoint writes a new *image*: a [`SegQueue`] of records named `NAME.G` (files
//! `NAME.G.NNNNNN.seg`, compressed blocks with checksums), `G` its generation. The manifest
//! records its [`QueueMark`] and the files' CRC-32s like any other segment file's, so a
//! damaged or missing image is refused by `checkpoint::load` (exit 5, naming the file). An
//! image is never written again once flushed: the one the committed manifest needs stays
//! intact while the next is written, and it is deleted only when the image after it is
//! begun (its manifest is committed by then: a run whose commit failed has stopped). So at
//! most two images are on disk, and a resume continues from the one its manifest names,
//! whatever a killed checkpoint left of the next.

use super::budget::Account;
use super::queue::{QueueMark, SegQueue};
use super::{FileMark, Storage};
use crate::error::StorageError;
use std::path::PathBuf;

/// Where an image is: its generation and its queue's mark.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ImageMark {
    pub generation: u64,
    pub queue: QueueMark,
}

/// The images of one structure (see the module docs).
pub struct Images {
    name: String,
    /// One account for every generation (its disk bytes: the last image's), so that the
    /// run's structures do not list one per checkpoint.
    account: Account,
    /// The last image written or resumed from (0: none yet).
    generation: u64,
}

impl Images {
    /// The images of structure `name` in `storage`'s directory; `resumed` is the mark of the
    /// image a resume starts from.
    pub fn new(storage: &Storage, name: &str, resumed: Option<&ImageMark>) -> Images {
        Images {
            name: name.to_string(),
            account: storage.budget.account(name),
            generation: resumed.map_or(0, |m| m.generation),
        }
    }

    fn queue_name(&self, generation: u64) -> String {
        format!("{}.{generation}", self.name)
    }

    /// Writes a new image: `fill` pushes its records. The files are synced; the mark and the
    /// file marks go into the checkpoint. Images other than the last one (which the
    /// committed manifest needs) are deleted first, a stale one of the new generation (left
    /// by a checkpoint killed before its commit) included.
    pub fn write(
        &mut self,
        storage: &Storage,
        fill: impl FnOnce(&mut ImageWriter) -> Result<(), StorageError>,
    ) -> Result<(ImageMark, Vec<FileMark>), StorageError> {
        self.remove_all_but(storage, self.generation)?;
        let generation = self.generation + 1;
        let name = self.queue_name(generation);
        let queue = SegQueue::create(
            storage.dir(),
            &name,
            &storage.options(),
            self.account.clone(),
        )?;
        let mut w = ImageWriter { queue };
        fill(&mut w)?;
        let mark = w.queue.flush()?;
        let files = w.queue.files(&mark);
        let (raw, _) = w.queue.sealed_bytes();
        let disk = w.queue.disk_bytes();
        drop(w);
        // The writer's buffers are gone: the account keeps only the file.
        self.account.set(0, disk, raw);
        self.generation = generation;
        Ok((
            ImageMark {
                generation,
                queue: mark,
            },
            files,
        ))
    }

    /// Opens the image at `mark` for reading its records in order.
    pub fn read(&self, storage: &Storage, mark: &ImageMark) -> Result<ImageReader, StorageError> {
        let name = self.queue_name(mark.generation);
        let queue = storage.open_queue_accounted(&name, &mark.queue, Account::detached(&name))?;
        let path = storage.dir().join(format!("{name}.000000.seg"));
        Ok(ImageReader {
            queue,
            path,
            read: 0,
            buf: Vec::new(),
        })
    }

    /// Deletes the files of every image of this structure but generation `keep`.
    fn remove_all_but(&self, storage: &Storage, keep: u64) -> Result<(), StorageError> {
        let prefix = format!("{}.", self.name);
        let dir = storage.dir();
        let entries = std::fs::read_dir(dir)
            .map_err(super::segment::io_err(dir, "list the run directory"))?;
        for e in entries.flatten() {
            let file = e.file_name();
            let Some(rest) = file.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
                continue;
            };
            // `G.NNNNNN.seg`: anything else (another structure's `NAME.x` files) stays.
            let mut parts = rest.split('.');
            let generation = parts.next().and_then(|g| g.parse::<u64>().ok());
            let number = parts
                .next()
                .filter(|n| n.bytes().all(|b| b.is_ascii_digit()));
            let (Some(generation), Some(_), Some("seg"), None) =
                (generation, number, parts.next(), parts.next())
            else {
                continue;
            };
            if generation != keep {
                let path = e.path();
                match std::fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                    Err(err) => {
                        return Err(super::segment::io_err(&path, "remove an older image")(err))
                    }
                }
            }
        }
        Ok(())
    }
}

/// Pushes the records of a new image.
pub struct ImageWriter {
    queue: SegQueue,
}

/// Values per record of an image's arrays of words ([`ImageWriter::push_words`]): 64 KiB
/// of `u32`, 128 KiB of `u64`, far below a record's 4 GiB bound whatever the array's size.
pub const CHUNK: usize = 16384;

impl ImageWriter {
    pub fn push(&mut self, rec: &[u8]) -> Result<(), StorageError> {
        self.queue.push(rec)
    }

    /// Pushes `values` as words of `W` little-endian bytes (`W` at most 8, each value's low
    /// bytes), [`CHUNK`] a record; [`ImageReader::words`] reads them back.
    pub fn push_words<const W: usize, T: Copy + Into<u64>>(
        &mut self,
        values: &[T],
    ) -> Result<(), StorageError> {
        let mut buf = Vec::with_capacity(values.len().min(CHUNK) * W);
        for c in values.chunks(CHUNK) {
            buf.clear();
            for &v in c {
                buf.extend_from_slice(&v.into().to_le_bytes()[..W]);
            }
            self.queue.push(&buf)?;
        }
        Ok(())
    }
}

/// Reads an image's records back in order.
pub struct ImageReader {
    queue: SegQueue,
    /// The image's first file, named by the errors about its contents.
    path: PathBuf,
    /// Records read so far.
    read: u64,
    buf: Vec<u8>,
}

impl ImageReader {
    /// Reads the next record (`what`, for the error when the image has no more), which
    /// [`ImageReader::record`] then gives.
    pub fn next(&mut self, what: &str) -> Result<(), StorageError> {
        if !self.queue.pop(&mut self.buf)? {
            return Err(StorageError::Image {
                path: self.path.clone(),
                problem: format!(
                    "it ends after {} records, where {what} was expected",
                    self.read
                ),
            });
        }
        self.read += 1;
        Ok(())
    }

    /// Reads `n` words of `W` bytes that [`ImageWriter::push_words`] wrote (`what` names
    /// them in the errors), each handed to `f`.
    pub fn words<const W: usize>(
        &mut self,
        n: u64,
        what: &str,
        mut f: impl FnMut(u64),
    ) -> Result<(), StorageError> {
        let mut left = n;
        while left > 0 {
            let want = left.min(CHUNK as u64);
            self.next(what)?;
            if self.buf.len() as u64 != want * W as u64 {
                return Err(self.bad(what));
            }
            for b in self.buf.chunks_exact(W) {
                let mut v = [0u8; 8];
                v[..W].copy_from_slice(b);
                f(u64::from_le_bytes(v));
            }
            left -= want;
        }
        Ok(())
    }

    /// The record read last.
    pub fn record(&self) -> &[u8] {
        &self.buf
    }

    /// The error for the record read last, which does not hold `expected`.
    pub fn bad(&self, expected: &str) -> StorageError {
        StorageError::Image {
            path: self.path.clone(),
            problem: format!(
                "record {} is not {expected} ({} bytes)",
                self.read,
                self.buf.len()
            ),
        }
    }

    /// Checks that every record was read.
    pub fn finish(self) -> Result<(), StorageError> {
        if !self.queue.is_empty() {
            return Err(StorageError::Image {
                path: self.path,
                problem: format!(
                    "{} records left after the {} its reader expects",
                    self.queue.len(),
                    self.read
                ),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::StorageConfig;

    fn generations(dir: &std::path::Path) -> Vec<u64> {
        let mut g: Vec<u64> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let n = e.file_name().into_string().ok()?;
                n.strip_prefix("x.")?.split('.').next()?.parse().ok()
            })
            .collect();
        g.sort();
        g
    }

    /// Each write is a new generation; the one before the last is deleted when the next
    /// begins (and a stale file of the new generation is replaced); records read back in
    /// order, and a reader that expects more or fewer records gets an error naming the file.
    #[test]
    fn images_keep_the_last_generation_and_read_back_exactly() {
        let tmp = tempfile::tempdir().unwrap();
        let storage = Storage::kept(tmp.path(), &StorageConfig::default());
        // Another structure's files with the same stem stay.
        std::fs::write(tmp.path().join("x.evicted.000000.seg"), b"other").unwrap();
        let mut images = Images::new(&storage, "x", None);
        let mut marks = Vec::new();
        for g in 1..=3u64 {
            let (mark, files) = images
                .write(&storage, |w| {
                    for i in 0..g * 1000 {
                        w.push(&i.to_le_bytes()[..(i % 9) as usize])?;
                    }
                    Ok(())
                })
                .unwrap();
            assert_eq!(mark.generation, g);
            assert_eq!(files.len(), 1);
            marks.push(mark);
            assert_eq!(
                generations(tmp.path()),
                (g.saturating_sub(1).max(1)..=g).collect::<Vec<_>>()
            );
        }
        assert!(tmp.path().join("x.evicted.000000.seg").exists());
        let mut r = images.read(&storage, &marks[2]).unwrap();
        for i in 0..3000u64 {
            r.next("a record").unwrap();
            assert_eq!(r.record(), &i.to_le_bytes()[..(i % 9) as usize]);
        }
        let err = r.next("one more").unwrap_err().to_string();
        assert!(
            err.contains("x.3.000000.seg") && err.contains("ends after 3000 records"),
            "{err}"
        );
        let r = images.read(&storage, &marks[2]).unwrap();
        let err = r.finish().unwrap_err().to_string();
        assert!(err.contains("3000 records left"), "{err}");
        // A resumed run continues from generation 2 (a killed checkpoint left 3): the next
        // write replaces 3 and removes nothing the resumed manifest needs.
        let mut resumed = Images::new(&storage, "x", Some(&marks[1]));
        let (mark, _) = resumed.write(&storage, |w| w.push(b"new")).unwrap();
        assert_eq!(mark.generation, 3);
        assert_eq!(generations(tmp.path()), vec![2, 3]);
        let mut r = resumed.read(&storage, &mark).unwrap();
        r.next("a record").unwrap();
        assert_eq!(r.record(), b"new");
        r.finish().unwrap();
    }
}
