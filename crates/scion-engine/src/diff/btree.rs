//! Just enough of SQLite's file format to read b-tree pages and records
//! (<https://sqlite.org/fileformat2.html>): page headers, cells, overflow chains and the
//! record encoding. Every length is checked; bad bytes are errors, never panics.

use crate::error::{EngineError, EngineResult};

/// A value decoded from a record: one of SQLite's five storage classes, which its file
/// format fixes (so, unlike scion's other enums, this one is exhaustive).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// A signed integer.
    Integer(i64),
    /// A floating-point number.
    Real(f64),
    /// Text, as its bytes in the database's encoding.
    Text(Vec<u8>),
    /// A blob.
    Blob(Vec<u8>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PageKind {
    TableInterior,
    TableLeaf,
    IndexInterior,
    IndexLeaf,
}

/// One cell: for table leaves the rowid and payload; for interiors the left child.
#[derive(Debug, Clone)]
pub(crate) struct Cell {
    pub left_child: Option<u32>,
    pub rowid: Option<i64>,
    /// The payload stored on the page, and where its overflow chain starts.
    pub local: Vec<u8>,
    pub payload_size: u64,
    pub overflow: Option<u32>,
}

#[derive(Debug, Clone)]
pub(crate) struct BtreePage {
    pub kind: PageKind,
    pub cells: Vec<Cell>,
    pub right_child: Option<u32>,
}

fn bad(what: impl Into<String>) -> EngineError {
    EngineError::corrupt("sqlite page", what.into())
}

/// SQLite's big-endian varint (1 to 9 bytes).
pub fn varint(buf: &[u8], pos: &mut usize) -> EngineResult<u64> {
    let mut v: u64 = 0;
    for i in 0..9 {
        let b = *buf
            .get(*pos)
            .ok_or_else(|| bad("varint past end of page"))?;
        *pos += 1;
        if i == 8 {
            return Ok((v << 8) | b as u64);
        }
        v = (v << 7) | (b & 0x7f) as u64;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Ok(v)
}

fn be(buf: &[u8], at: usize, n: usize) -> EngineResult<u64> {
    let s = buf
        .get(at..at + n)
        .ok_or_else(|| bad("field past end of page"))?;
    Ok(s.iter().fold(0u64, |a, b| (a << 8) | *b as u64))
}

/// Parse a b-tree page; `None` when the page is not a b-tree page (overflow, freelist).
pub(crate) fn parse_page(page: &[u8], pgno: u32, usable: usize) -> EngineResult<Option<BtreePage>> {
    let h = if pgno == 1 { 100 } else { 0 };
    let kind = match page.get(h) {
        Some(0x02) => PageKind::IndexInterior,
        Some(0x05) => PageKind::TableInterior,
        Some(0x0a) => PageKind::IndexLeaf,
        Some(0x0d) => PageKind::TableLeaf,
        _ => return Ok(None),
    };
    let interior = matches!(kind, PageKind::IndexInterior | PageKind::TableInterior);
    let ncells = be(page, h + 3, 2)? as usize;
    let right_child = if interior {
        Some(be(page, h + 8, 4)? as u32)
    } else {
        None
    };
    let ptrs = h + if interior { 12 } else { 8 };
    let mut cells = Vec::with_capacity(ncells);
    for i in 0..ncells {
        let mut pos = be(page, ptrs + 2 * i, 2)? as usize;
        if pos >= page.len() {
            return Err(bad(format!("cell pointer {pos} outside page {pgno}")));
        }
        let left_child = if interior {
            let c = be(page, pos, 4)? as u32;
            pos += 4;
            Some(c)
        } else {
            None
        };
        if kind == PageKind::TableInterior {
            let rowid = varint(page, &mut pos)? as i64;
            cells.push(Cell {
                left_child,
                rowid: Some(rowid),
                local: Vec::new(),
                payload_size: 0,
                overflow: None,
            });
            continue;
        }
        let payload_size = varint(page, &mut pos)?;
        let rowid = if kind == PageKind::TableLeaf {
            Some(varint(page, &mut pos)? as i64)
        } else {
            None
        };
        let local_len = local_payload(payload_size, usable, kind == PageKind::TableLeaf);
        let local = page
            .get(pos..pos + local_len)
            .ok_or_else(|| bad(format!("cell payload past end of page {pgno}")))?
            .to_vec();
        let overflow = if (local_len as u64) < payload_size {
            Some(be(page, pos + local_len, 4)? as u32)
        } else {
            None
        };
        cells.push(Cell {
            left_child,
            rowid,
            local,
            payload_size,
            overflow,
        });
    }
    Ok(Some(BtreePage {
        kind,
        cells,
        right_child,
    }))
}

/// How much of a payload is stored on the b-tree page itself.
fn local_payload(p: u64, usable: usize, table_leaf: bool) -> usize {
    let u = usable as u64;
    let x = if table_leaf {
        u - 35
    } else {
        (u - 12) * 64 / 255 - 23
    };
    if p <= x {
        return p as usize;
    }
    let m = (u - 12) * 32 / 255 - 23;
    let k = m + (p - m) % (u - 4);
    (if k <= x { k } else { m }) as usize
}

/// Decode a record into values.
pub(crate) fn decode_record(payload: &[u8]) -> EngineResult<Vec<Value>> {
    let mut pos = 0;
    let header_len = varint(payload, &mut pos)? as usize;
    if header_len > payload.len() {
        return Err(bad("record header longer than the record"));
    }
    let mut types = Vec::new();
    while pos < header_len {
        types.push(varint(payload, &mut pos)?);
    }
    let mut at = header_len;
    let mut out = Vec::with_capacity(types.len());
    for t in types {
        let take = |n: usize, at: &mut usize| -> EngineResult<&[u8]> {
            let s = payload
                .get(*at..*at + n)
                .ok_or_else(|| bad("record value past its end"))?;
            *at += n;
            Ok(s)
        };
        let int = |b: &[u8]| -> i64 {
            let mut v: i64 = if b.first().is_some_and(|x| x & 0x80 != 0) {
                -1
            } else {
                0
            };
            for x in b {
                v = (v << 8) | *x as i64;
            }
            v
        };
        out.push(match t {
            0 => Value::Null,
            1 => Value::Integer(int(take(1, &mut at)?)),
            2 => Value::Integer(int(take(2, &mut at)?)),
            3 => Value::Integer(int(take(3, &mut at)?)),
            4 => Value::Integer(int(take(4, &mut at)?)),
            5 => Value::Integer(int(take(6, &mut at)?)),
            6 => Value::Integer(int(take(8, &mut at)?)),
            7 => Value::Real(f64::from_bits(u64::from_be_bytes(
                take(8, &mut at)?.try_into().unwrap(),
            ))),
            8 => Value::Integer(0),
            9 => Value::Integer(1),
            n if n >= 12 && n % 2 == 0 => {
                Value::Blob(take(((n - 12) / 2) as usize, &mut at)?.to_vec())
            }
            n if n >= 13 => Value::Text(take(((n - 13) / 2) as usize, &mut at)?.to_vec()),
            n => return Err(bad(format!("reserved serial type {n}"))),
        });
    }
    Ok(out)
}
