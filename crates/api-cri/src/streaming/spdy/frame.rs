//! SPDY/3.1 frames, as kubelet's streaming peers (moby/spdystream) write
//! them: control frames (a set high bit, the version 3, a type, flags and
//! a 24-bit length) and data frames (a 31-bit stream id, flags, length).
//! Header blocks are name/value pairs with 32-bit counts and lengths,
//! compressed by one zlib stream per direction with SPDY's dictionary
//! ([`super::dictionary`]), each block flushed with a sync flush.

use bytes::{Buf as _, BufMut as _, Bytes, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// The FIN flag: the sender's last frame on the stream.
pub(crate) const FLAG_FIN: u8 = 0x01;

/// The most a frame may carry: its 24-bit length.
pub(crate) const MAX_LENGTH: usize = (1 << 24) - 1;

/// The most a header block may hold once inflated (a bound against a
/// block that inflates without end).
const MAX_HEADER_BLOCK: usize = 1 << 20;

const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const HEADERS: u16 = 8;
const WINDOW_UPDATE: u16 = 9;

/// A header block: names lower-case, as SPDY sends them.
pub(crate) type Headers = Vec<(String, String)>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    SynStream {
        stream_id: u32,
        flags: u8,
        headers: Headers,
    },
    SynReply {
        stream_id: u32,
        flags: u8,
        headers: Headers,
    },
    RstStream {
        stream_id: u32,
        status: u32,
    },
    Ping {
        id: u32,
    },
    GoAway {
        last_good_stream_id: u32,
        status: u32,
    },
    WindowUpdate {
        stream_id: u32,
        delta: u32,
    },
    Data {
        stream_id: u32,
        flags: u8,
        data: Bytes,
    },
    /// SETTINGS, HEADERS, or a type this end does not act on: read and
    /// passed over.
    Other {
        kind: u16,
    },
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum FrameError {
    #[error("SPDY version {0} (only 3 is spoken)")]
    Version(u16),
    #[error("a {kind} frame of {length} bytes is too short")]
    Short { kind: &'static str, length: usize },
    #[error("a header block that does not inflate: {0}")]
    Inflate(String),
    #[error("a header block larger than {MAX_HEADER_BLOCK} bytes")]
    HeadersTooLarge,
    #[error("a malformed header block: {0}")]
    HeaderBlock(&'static str),
    #[error("a frame larger than {MAX_LENGTH} bytes")]
    TooLarge,
    #[error("a header block that does not deflate: {0}")]
    Deflate(String),
}

/// One direction's header compression state and the frame reader and
/// writer around it. A connection has one for what it reads and one for
/// what it writes (each zlib stream runs for the whole connection).
#[derive(Debug)]
pub(crate) struct Reader {
    inflate: Decompress,
}

impl Default for Reader {
    fn default() -> Self {
        Reader {
            inflate: Decompress::new(true),
        }
    }
}

impl Reader {
    /// The next whole frame at the front of `buf` (taken from it), `None`
    /// while it is not all there yet.
    pub(crate) fn read(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        let Some(head) = buf.get(..8) else {
            return Ok(None);
        };
        let length = usize::from(head[5]) << 16 | usize::from(head[6]) << 8 | usize::from(head[7]);
        if buf.len() < 8 + length {
            return Ok(None);
        }
        let control = head[0] & 0x80 != 0;
        let word = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        let flags = head[4];
        buf.advance(8);
        let mut body = buf.split_to(length).freeze();
        if !control {
            return Ok(Some(Frame::Data {
                stream_id: word & 0x7fff_ffff,
                flags,
                data: body,
            }));
        }
        let version = u16::try_from(word >> 16 & 0x7fff).unwrap_or(u16::MAX);
        if version != 3 {
            return Err(FrameError::Version(version));
        }
        let kind = u16::try_from(word & 0xffff).unwrap_or(u16::MAX);
        let need = |n: usize, name: &'static str| {
            if length < n {
                Err(FrameError::Short { kind: name, length })
            } else {
                Ok(())
            }
        };
        Ok(Some(match kind {
            SYN_STREAM => {
                need(10, "SYN_STREAM")?;
                let stream_id = body.get_u32() & 0x7fff_ffff;
                body.advance(6); // associated stream, priority, slot
                Frame::SynStream {
                    stream_id,
                    flags,
                    headers: self.headers(&body)?,
                }
            }
            SYN_REPLY => {
                need(4, "SYN_REPLY")?;
                let stream_id = body.get_u32() & 0x7fff_ffff;
                Frame::SynReply {
                    stream_id,
                    flags,
                    headers: self.headers(&body)?,
                }
            }
            HEADERS => {
                // Its block goes through the shared zlib stream: inflated
                // even though nothing here acts on it.
                need(4, "HEADERS")?;
                body.advance(4);
                self.headers(&body)?;
                Frame::Other { kind }
            }
            RST_STREAM => {
                need(8, "RST_STREAM")?;
                Frame::RstStream {
                    stream_id: body.get_u32() & 0x7fff_ffff,
                    status: body.get_u32(),
                }
            }
            PING => {
                need(4, "PING")?;
                Frame::Ping { id: body.get_u32() }
            }
            GOAWAY => {
                need(4, "GOAWAY")?;
                let last_good_stream_id = body.get_u32() & 0x7fff_ffff;
                let status = if body.remaining() >= 4 {
                    body.get_u32()
                } else {
                    0
                };
                Frame::GoAway {
                    last_good_stream_id,
                    status,
                }
            }
            WINDOW_UPDATE => {
                need(8, "WINDOW_UPDATE")?;
                Frame::WindowUpdate {
                    stream_id: body.get_u32() & 0x7fff_ffff,
                    delta: body.get_u32() & 0x7fff_ffff,
                }
            }
            _ => Frame::Other { kind },
        }))
    }

    fn headers(&mut self, compressed: &[u8]) -> Result<Headers, FrameError> {
        let block = self.inflate(compressed)?;
        parse_block(&block)
    }

    fn inflate(&mut self, mut input: &[u8]) -> Result<Vec<u8>, FrameError> {
        let mut out = Vec::with_capacity((input.len() * 4 + 64).min(MAX_HEADER_BLOCK));
        loop {
            if out.len() >= MAX_HEADER_BLOCK {
                return Err(FrameError::HeadersTooLarge);
            }
            if out.len() == out.capacity() {
                out.reserve(out.len().clamp(256, MAX_HEADER_BLOCK));
            }
            let (before, produced) = (self.inflate.total_in(), out.len());
            let result = self
                .inflate
                .decompress_vec(input, &mut out, FlushDecompress::Sync);
            let used = usize::try_from(self.inflate.total_in() - before).unwrap_or(input.len());
            input = &input[used.min(input.len())..];
            let stuck = used == 0 && out.len() == produced && out.len() < out.capacity();
            match result {
                Ok(Status::Ok | Status::BufError)
                    if input.is_empty() && out.len() < out.capacity() =>
                {
                    return Ok(out);
                }
                Ok(Status::StreamEnd) => return Ok(out),
                // Input left that zlib takes nothing of, with room to write:
                // it never will.
                Ok(_) if stuck => {
                    return Err(FrameError::Inflate("input zlib does not take".to_owned()));
                }
                Ok(_) => {}
                Err(e) if e.needs_dictionary().is_some() => {
                    self.inflate
                        .set_dictionary(&super::dictionary::DICTIONARY)
                        .map_err(|e| FrameError::Inflate(e.to_string()))?;
                }
                Err(e) => return Err(FrameError::Inflate(e.to_string())),
            }
        }
    }
}

fn parse_block(mut block: &[u8]) -> Result<Headers, FrameError> {
    fn take<'a>(block: &mut &'a [u8], n: usize) -> Result<&'a [u8], FrameError> {
        if block.len() < n {
            return Err(FrameError::HeaderBlock("a length past its end"));
        }
        let (head, rest) = block.split_at(n);
        *block = rest;
        Ok(head)
    }
    fn length(block: &mut &[u8]) -> Result<usize, FrameError> {
        let b = take(block, 4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }
    fn text(bytes: &[u8]) -> Result<String, FrameError> {
        String::from_utf8(bytes.to_vec()).map_err(|_| FrameError::HeaderBlock("not UTF-8"))
    }
    let count = length(&mut block)?;
    // Each pair takes eight bytes at least: a count past that is a lie.
    if count > block.len() / 8 {
        return Err(FrameError::HeaderBlock("more pairs than bytes"));
    }
    let mut headers = Vec::with_capacity(count);
    for _ in 0..count {
        let n = length(&mut block)?;
        let name = text(take(&mut block, n)?)?.to_ascii_lowercase();
        let n = length(&mut block)?;
        let value = text(take(&mut block, n)?)?;
        headers.push((name, value));
    }
    Ok(headers)
}

/// What a connection writes: frames, header blocks deflated in one zlib
/// stream.
#[derive(Debug)]
pub(crate) struct Writer {
    deflate: Compress,
}

impl Default for Writer {
    fn default() -> Self {
        let mut deflate = Compress::new(Compression::default(), true);
        // Set before the first byte: the zlib header names the dictionary.
        if let Err(e) = deflate.set_dictionary(&super::dictionary::DICTIONARY) {
            tracing::error!(error = %e, "SPDY's header dictionary was not taken");
        }
        Writer { deflate }
    }
}

impl Writer {
    /// `frame` onto `out`.
    pub(crate) fn write(&mut self, frame: &Frame, out: &mut BytesMut) -> Result<(), FrameError> {
        match frame {
            Frame::Data {
                stream_id,
                flags,
                data,
            } => {
                let length = u32::try_from(data.len())
                    .ok()
                    .filter(|&n| n as usize <= MAX_LENGTH)
                    .ok_or(FrameError::TooLarge)?;
                out.put_u32(stream_id & 0x7fff_ffff);
                out.put_u32(u32::from(*flags) << 24 | length);
                out.put_slice(data);
            }
            Frame::SynStream {
                stream_id,
                flags,
                headers,
            } => {
                let mut body = BytesMut::new();
                body.put_u32(stream_id & 0x7fff_ffff);
                body.put_u32(0); // associated stream
                body.put_u16(0); // priority, slot
                body.put_slice(&self.deflate_block(headers)?);
                control(out, SYN_STREAM, *flags, &body)?;
            }
            Frame::SynReply {
                stream_id,
                flags,
                headers,
            } => {
                let mut body = BytesMut::new();
                body.put_u32(stream_id & 0x7fff_ffff);
                body.put_slice(&self.deflate_block(headers)?);
                control(out, SYN_REPLY, *flags, &body)?;
            }
            Frame::RstStream { stream_id, status } => {
                let mut body = BytesMut::new();
                body.put_u32(stream_id & 0x7fff_ffff);
                body.put_u32(*status);
                control(out, RST_STREAM, 0, &body)?;
            }
            Frame::Ping { id } => control(out, PING, 0, &id.to_be_bytes())?,
            Frame::GoAway {
                last_good_stream_id,
                status,
            } => {
                let mut body = BytesMut::new();
                body.put_u32(last_good_stream_id & 0x7fff_ffff);
                body.put_u32(*status);
                control(out, GOAWAY, 0, &body)?;
            }
            Frame::WindowUpdate { stream_id, delta } => {
                let mut body = BytesMut::new();
                body.put_u32(stream_id & 0x7fff_ffff);
                body.put_u32(delta & 0x7fff_ffff);
                control(out, WINDOW_UPDATE, 0, &body)?;
            }
            Frame::Other { kind } => control(out, *kind, 0, &[])?,
        }
        Ok(())
    }

    fn deflate_block(&mut self, headers: &Headers) -> Result<Vec<u8>, FrameError> {
        let mut block = Vec::new();
        let len = |n: usize| u32::try_from(n).map_err(|_| FrameError::TooLarge);
        block.put_u32(len(headers.len())?);
        for (name, value) in headers {
            block.put_u32(len(name.len())?);
            block.put_slice(name.to_ascii_lowercase().as_bytes());
            block.put_u32(len(value.len())?);
            block.put_slice(value.as_bytes());
        }
        let mut out = Vec::with_capacity(block.len() + 64);
        let mut input = &block[..];
        loop {
            let before = self.deflate.total_in();
            self.deflate
                .compress_vec(input, &mut out, FlushCompress::Sync)
                .map_err(|e| FrameError::Deflate(e.to_string()))?;
            let used = usize::try_from(self.deflate.total_in() - before).unwrap_or(input.len());
            input = &input[used.min(input.len())..];
            // Done once all is in and the flush had room to finish.
            if input.is_empty() && out.len() < out.capacity() {
                return Ok(out);
            }
            out.reserve(out.capacity().max(64));
        }
    }
}

fn control(out: &mut BytesMut, kind: u16, flags: u8, body: &[u8]) -> Result<(), FrameError> {
    let length = u32::try_from(body.len())
        .ok()
        .filter(|&n| n as usize <= MAX_LENGTH)
        .ok_or(FrameError::TooLarge)?;
    out.put_u16(0x8003); // control, version 3
    out.put_u16(kind);
    out.put_u32(u32::from(flags) << 24 | length);
    out.put_slice(body);
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn round_trip(frames: &[Frame]) -> Vec<Frame> {
        let (mut writer, mut reader) = (Writer::default(), Reader::default());
        let mut wire = BytesMut::new();
        for f in frames {
            writer.write(f, &mut wire).unwrap();
        }
        let mut read = Vec::new();
        while let Some(f) = reader.read(&mut wire).unwrap() {
            read.push(f);
        }
        assert!(wire.is_empty());
        read
    }

    #[test]
    fn frames_round_trip_through_one_zlib_stream_per_direction() {
        let headers = |t: &str| vec![("streamtype".to_owned(), t.to_owned())];
        let frames = vec![
            Frame::SynStream {
                stream_id: 1,
                flags: 0,
                headers: headers("error"),
            },
            Frame::SynStream {
                stream_id: 3,
                flags: 0,
                headers: headers("stdout"),
            },
            Frame::SynReply {
                stream_id: 3,
                flags: 0,
                headers: Vec::new(),
            },
            Frame::Data {
                stream_id: 3,
                flags: FLAG_FIN,
                data: Bytes::from_static(b"hello"),
            },
            Frame::Ping { id: 7 },
            Frame::WindowUpdate {
                stream_id: 3,
                delta: 65536,
            },
            Frame::RstStream {
                stream_id: 5,
                status: 5,
            },
            Frame::GoAway {
                last_good_stream_id: 3,
                status: 0,
            },
        ];
        assert_eq!(round_trip(&frames), frames);
    }

    #[test]
    fn a_frame_is_read_only_once_whole() {
        let mut writer = Writer::default();
        let mut wire = BytesMut::new();
        writer
            .write(
                &Frame::Data {
                    stream_id: 1,
                    flags: 0,
                    data: Bytes::from_static(b"abc"),
                },
                &mut wire,
            )
            .unwrap();
        let whole = wire.clone();
        let mut reader = Reader::default();
        for n in 0..whole.len() {
            let mut part = BytesMut::from(&whole[..n]);
            assert_eq!(reader.read(&mut part).unwrap(), None);
        }
    }

    #[test]
    fn data_frames_have_the_layout_spdystream_reads() {
        let mut wire = BytesMut::new();
        Writer::default()
            .write(
                &Frame::Data {
                    stream_id: 5,
                    flags: FLAG_FIN,
                    data: Bytes::from_static(b"hi"),
                },
                &mut wire,
            )
            .unwrap();
        assert_eq!(&wire[..], [0, 0, 0, 5, 1, 0, 0, 2, b'h', b'i']);
        let mut wire = BytesMut::new();
        Writer::default()
            .write(&Frame::Ping { id: 1 }, &mut wire)
            .unwrap();
        assert_eq!(&wire[..], [0x80, 3, 0, 6, 0, 0, 0, 4, 0, 0, 0, 1]);
    }

    #[test]
    fn bad_frames_are_refused_not_guessed() {
        let mut reader = Reader::default();
        // version 2
        let mut wire = BytesMut::from(&[0x80, 2, 0, 6, 0, 0, 0, 4, 0, 0, 0, 1][..]);
        assert_eq!(reader.read(&mut wire), Err(FrameError::Version(2)));
        // a RST_STREAM too short
        let mut wire = BytesMut::from(&[0x80, 3, 0, 3, 0, 0, 0, 2, 0, 0][..]);
        assert!(matches!(
            Reader::default().read(&mut wire),
            Err(FrameError::Short { .. })
        ));
        // a header block that is no zlib
        let mut wire = BytesMut::from(&[0x80, 3, 0, 2, 0, 0, 0, 8, 0, 0, 0, 1, 1, 2, 3, 4][..]);
        assert!(matches!(
            Reader::default().read(&mut wire),
            Err(FrameError::Inflate(_))
        ));
    }

    fn hex(s: &str) -> BytesMut {
        let bytes: Vec<u8> = (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect();
        BytesMut::from(&bytes[..])
    }

    /// What node-spdy's spdy-transport sent first as a client (captured
    /// off the wire): SETTINGS, a session WINDOW_UPDATE, and the SYN_STREAM
    /// of an exec's error stream, its headers deflated by another zlib.
    #[test]
    fn frames_captured_from_another_implementation_are_read() {
        let mut wire = hex(
            "800300040000000c000000010100000700100000800300090000000800000000000f0000\
             800300010000005a0000000100000000600038ace3c6a7c202a523703a2b294a4dcc8516\
             25aca9a0800625532b78626609f00f0e0125572bec4997d5aa20115c9631ea8335162767\
             a4e6820dcb2829292806ab80163a9ca0e22007c401000000ffff",
        );
        let mut reader = Reader::default();
        assert_eq!(
            reader.read(&mut wire).unwrap(),
            Some(Frame::Other { kind: 4 })
        );
        assert_eq!(
            reader.read(&mut wire).unwrap(),
            Some(Frame::WindowUpdate {
                stream_id: 0,
                delta: 983_040
            })
        );
        let Some(Frame::SynStream {
            stream_id, headers, ..
        }) = reader.read(&mut wire).unwrap()
        else {
            panic!("no SYN_STREAM");
        };
        assert_eq!(stream_id, 1);
        assert!(headers.contains(&("streamtype".to_owned(), "error".to_owned())));
        assert!(wire.is_empty());
    }

    /// Built by Python's zlib at level 9 (another deflater than ours): an
    /// empty SYN_REPLY, an empty FIN, a GOAWAY.
    #[test]
    fn frames_of_another_deflater_are_read() {
        let mut wire = hex("80030002000000140000000178f9e3c6a7c202a6230600000000ffff");
        assert_eq!(
            Reader::default().read(&mut wire).unwrap(),
            Some(Frame::SynReply {
                stream_id: 1,
                flags: 0,
                headers: Vec::new()
            })
        );
        let mut wire = hex("0000000301000000");
        assert_eq!(
            Reader::default().read(&mut wire).unwrap(),
            Some(Frame::Data {
                stream_id: 3,
                flags: FLAG_FIN,
                data: Bytes::new()
            })
        );
        let mut wire = hex("80030007000000080000000900000000");
        assert_eq!(
            Reader::default().read(&mut wire).unwrap(),
            Some(Frame::GoAway {
                last_good_stream_id: 9,
                status: 0
            })
        );
    }

    #[test]
    fn header_blocks_are_checked() {
        assert!(parse_block(&[0, 0, 0, 200]).is_err());
        assert!(parse_block(&[0, 0, 0, 1, 0, 0, 0, 9, b'a', 0, 0, 0, 0]).is_err());
        assert_eq!(
            parse_block(&[0, 0, 0, 1, 0, 0, 0, 1, b'A', 0, 0, 0, 1, b'b']).unwrap(),
            vec![("a".to_owned(), "b".to_owned())]
        );
    }
}
