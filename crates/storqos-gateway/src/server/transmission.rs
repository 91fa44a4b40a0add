//! The transmission phase's reader: parse each request, charge it to the in-flight
//! budgets, check it ([`crate::request_check`]), and hand it to the engine (reads,
//! writes, trims, write-zeroes), to a blocking thread (flushes) or answer it here
//! (block status, refusals).

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc::UnboundedSender;

use super::conn_error::{read_msg, ConnError};
use super::negotiation::Session;
use super::shared::Shared;
use crate::budget::{charge, ConnectionBudget, PAYLOAD_PIECE};
use crate::deadline::Deadline;
use crate::dmclock_wire::{decode_request_trailer, REQUEST_TRAILER_LEN};
use crate::export::Export;
use crate::io::Io;
use crate::message::{Form, Inflight, Job, Msg, Reply};
use crate::protocol::*;
use crate::request_check::{refusal, Served};
use crate::transport::ReadHalf;

pub(crate) fn err_reply(cookie: u64, error: u32, permit: Inflight) -> Reply {
    Reply::bare(cookie, error, permit, Form::Simple)
}

/// Take `bytes` of the connection's share, then of its tenant's (said once a minute
/// when the tenant's is spent and the request has to wait for replies to be taken).
pub(crate) async fn take_budget(
    budget: &ConnectionBudget,
    bytes: u32,
    shared: &Shared,
    tenant: u32,
) -> Option<Inflight> {
    budget
        .take(bytes, || {
            shared.notices.say(&shared.log, "tenant_inflight", || {
                format!(
                    "tenant {tenant}'s in-flight share of {} MiB is spent: its new requests wait until its clients \
                     take their replies (said once a minute while it lasts)",
                    budget.tenant_share() >> 20
                )
            })
        })
        .await
}

/// The transmission phase's reader: parse, check, submit. Returns `Ok(())` on
/// `NBD_CMD_DISC` or when the client closes between requests.
pub(crate) async fn transmission(
    rd: ReadHalf,
    replies: UnboundedSender<Reply>,
    export: Arc<Export>,
    shared: &Shared,
    session: Session,
    budget: &ConnectionBudget,
) -> std::result::Result<(), ConnError> {
    // Buffered: several small requests arrive in one read, and waiting for the next
    // request's first byte (the idle timeout) takes nothing from the stream. Once that
    // byte has come, the rest of the request must keep coming (`request_timeout`).
    let request_timeout = Duration::from_secs_f64(shared.limits.request_timeout_s);
    let mut rd = BufReader::with_capacity(PAYLOAD_PIECE as usize, Deadline::new(rd, request_timeout, false));
    let tenant = export.tenant;
    let idle = shared.limits.idle_timeout_s.map(Duration::from_secs_f64);
    let count_error = || {
        if let Ok(mut s) = shared.stats.lock() {
            s.error(tenant);
        }
    };
    loop {
        // Wait for the next request's first byte, without a deadline; a connection with
        // nothing in flight that sends nothing for the idle timeout is closed. (fill_buf
        // keeps what it reads, so giving up on it loses no byte.)
        rd.get_mut().disarm();
        let more = match idle {
            Some(idle) => loop {
                match tokio::time::timeout(idle, rd.fill_buf()).await {
                    Ok(r) => break !r?.is_empty(),
                    Err(_) if budget.is_idle() => return Err(ConnError::Idle),
                    Err(_) => {}
                }
            },
            None => !rd.fill_buf().await?.is_empty(),
        };
        if !more {
            // The client closed between requests.
            return Ok(());
        }
        rd.get_mut().arm();
        let mut hb = [0u8; REQUEST_LEN];
        read_msg(&mut rd, &mut hb, "request", false).await?;
        let h = RequestHeader::decode(&hb)?;
        let dist = if session.dmclock {
            let mut tb = [0u8; REQUEST_TRAILER_LEN];
            read_msg(&mut rd, &mut tb, "dmClock request trailer", false).await?;
            Some(decode_request_trailer(&tb))
        } else {
            None
        };
        let parsed = shared.clock.now();
        // Charge the request before taking it (a read its length: its reply's data; the
        // length of a READ / WRITE is at most 32 MiB here), and a write's payload piece by
        // piece as it arrives; all of it is given back once the reply is written.
        let data = if h.command == Command::Read { h.length } else { 0 };
        let Some(mut permit) = take_budget(budget, charge(data), shared, tenant).await else { return Ok(()) };
        let mut payload = Vec::new();
        if h.command == Command::Write {
            let len = h.length as usize;
            while payload.len() < len {
                let piece = (len - payload.len()).min(PAYLOAD_PIECE as usize);
                let Some(more) = take_budget(budget, piece as u32, shared, tenant).await else { return Ok(()) };
                permit.merge(more);
                let at = payload.len();
                payload.resize(at + piece, 0);
                read_msg(&mut rd, &mut payload[at..], "write payload", false).await?;
            }
        }
        if h.command == Command::Disc {
            return Ok(());
        }
        // Checks that answer with an error and keep the connection.
        let served = Served { size: export.size, read_only: export.read_only, block_status: session.block_status };
        let error = refusal(&h, &served);
        // Once structured replies are negotiated, a read is never answered simply (its
        // errors included).
        let form = match h.command {
            Command::Read if session.structured => Form::Read { offset: h.offset },
            _ => Form::Simple,
        };
        if let Some(e) = error {
            count_error();
            let _ = replies.send(Reply::bare(h.cookie, e, permit, form));
            continue;
        }
        match h.command {
            Command::Flush => {
                let (ex, tx, stats) = (export.clone(), replies.clone(), shared.stats.clone());
                let slots = shared.flushes.clone();
                tokio::spawn(async move {
                    // At most MAX_CONCURRENT_FLUSHES blocking threads flush at once.
                    let r = match slots.acquire_owned().await {
                        Ok(_slot) => tokio::task::spawn_blocking(move || ex.flush()).await.unwrap_or(Err(EIO)),
                        Err(_) => Err(ESHUTDOWN),
                    };
                    if let Ok(mut s) = stats.lock() {
                        match r {
                            Ok(()) => s.flushed(tenant),
                            Err(_) => s.error(tenant),
                        }
                    }
                    let _ = tx.send(err_reply(h.cookie, r.err().unwrap_or(0), permit));
                });
            }
            Command::BlockStatus => {
                // Metadata from the file system (lseek), not I/O: the policy does not see it.
                let extents = export.block_status(h.offset, h.length, h.flags & CMD_FLAG_REQ_ONE != 0);
                let chunk = encode_block_status_chunk(h.cookie, BASE_ALLOCATION_ID, &extents);
                // The reply's size is known now: charge it too.
                let size = u32::try_from(chunk.len()).unwrap_or(u32::MAX).min(MAX_IO_BYTES);
                let Some(more) = take_budget(budget, size, shared, tenant).await else { return Ok(()) };
                permit.merge(more);
                let _ = replies.send(Reply { data: chunk, ..Reply::bare(h.cookie, 0, permit, Form::Raw) });
            }
            Command::Read | Command::Write | Command::Trim | Command::WriteZeroes => {
                let fua = h.flags & CMD_FLAG_FUA != 0;
                let io = match h.command {
                    Command::Read => Io::Read(h.length),
                    Command::Write => Io::Write { data: payload, fua },
                    Command::Trim => Io::Trim { len: h.length, fua },
                    _ => Io::Zeroes { len: h.length, no_hole: h.flags & CMD_FLAG_NO_HOLE != 0, fua },
                };
                let job = Job {
                    export: export.clone(),
                    offset: h.offset,
                    io,
                    cookie: h.cookie,
                    reply: replies.clone(),
                    permit,
                    parsed,
                    form,
                    dist,
                };
                if let Err(e) = shared.sched_tx.send(Msg::Submit(job)) {
                    if let Msg::Submit(job) = e.0 {
                        job.refuse(ESHUTDOWN);
                    }
                }
            }
            Command::Disc | Command::Other(_) => {}
        }
    }
}
