//! Journals and temporary files, kept in memory: a journal that never reaches the disk can
//! never be replayed over a version the store already published.

#[derive(Debug, Default)]
pub(crate) struct MemFile {
    pub(crate) data: Vec<u8>,
}

impl MemFile {
    /// Bytes read, zero-filling past the end (false: the read was short).
    pub(crate) fn read(&self, offset: usize, out: &mut [u8]) -> bool {
        let end = offset.saturating_add(out.len());
        let have = self.data.len().min(end).saturating_sub(offset);
        if have > 0 {
            out[..have].copy_from_slice(&self.data[offset..offset + have]);
        }
        out[have..].fill(0);
        have == out.len()
    }

    pub(crate) fn write(&mut self, offset: usize, data: &[u8]) {
        let end = offset + data.len();
        if self.data.len() < end {
            self.data.resize(end, 0);
        }
        self.data[offset..end].copy_from_slice(data);
    }

    pub(crate) fn truncate(&mut self, size: usize) {
        self.data.truncate(size);
    }
}
