//! The checks a parsed request passes before it is served (NBD spec, "Request types" and
//! "Error values"), as a pure function of the request, its export's size and mode, and
//! what the session negotiated. A refused request is answered with the error and the
//! connection goes on; the order of the checks decides which error a request that
//! breaks several rules gets.

use crate::protocol::{
    Command, RequestHeader, CMD_FLAG_FUA, CMD_FLAG_NO_HOLE, CMD_FLAG_REQ_ONE, EINVAL, ENOSPC, EPERM,
};

/// What a request is checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Served {
    /// The export's size in bytes.
    pub size: u64,
    /// The export is served read-only.
    pub read_only: bool,
    /// `base:allocation` was negotiated for it: `NBD_CMD_BLOCK_STATUS` is answered.
    pub block_status: bool,
}

impl Served {
    /// Whether `offset .. offset + len` lies inside the export.
    pub fn contains(&self, offset: u64, len: u32) -> bool {
        offset.checked_add(u64::from(len)).is_some_and(|end| end <= self.size)
    }
}

/// The NBD error `h` is answered with before it is served, or `None` if it may go on:
/// an unknown command, flags the command does not take, block status not negotiated
/// and zero lengths are `EINVAL`; a write, trim or write-zeroes of a read-only export
/// `EPERM`; a range past the end `EINVAL` for a read, trim or block status and `ENOSPC`
/// for a write or write-zeroes (the spec's "no space left" for writes).
pub fn refusal(h: &RequestHeader, to: &Served) -> Option<u32> {
    let writes = matches!(h.command, Command::Write | Command::Trim | Command::WriteZeroes);
    match h.command {
        Command::Other(_) => Some(EINVAL),
        Command::WriteZeroes if h.flags & !(CMD_FLAG_FUA | CMD_FLAG_NO_HOLE) != 0 => Some(EINVAL),
        Command::Read | Command::Write | Command::Flush | Command::Trim if h.flags & !CMD_FLAG_FUA != 0 => Some(EINVAL),
        Command::BlockStatus if !to.block_status || h.flags & !CMD_FLAG_REQ_ONE != 0 => Some(EINVAL),
        Command::Read | Command::Write | Command::Trim | Command::WriteZeroes | Command::BlockStatus
            if h.length == 0 =>
        {
            Some(EINVAL)
        }
        _ if writes && to.read_only => Some(EPERM),
        Command::Read | Command::Trim | Command::BlockStatus if !to.contains(h.offset, h.length) => Some(EINVAL),
        Command::Write | Command::WriteZeroes if !to.contains(h.offset, h.length) => Some(ENOSPC),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZE: u64 = 1 << 20;
    const RW: Served = Served { size: SIZE, read_only: false, block_status: false };
    const RO: Served = Served { size: SIZE, read_only: true, block_status: false };
    const BS: Served = Served { size: SIZE, read_only: false, block_status: true };

    fn req(command: Command, flags: u16, offset: u64, length: u32) -> RequestHeader {
        RequestHeader { flags, command, cookie: 7, offset, length }
    }

    #[test]
    fn requests_inside_the_export_go_on() {
        for c in [Command::Read, Command::Write, Command::Trim, Command::WriteZeroes] {
            assert_eq!(refusal(&req(c, 0, 0, 4096), &RW), None, "{c:?}");
            // The last block exactly.
            assert_eq!(refusal(&req(c, CMD_FLAG_FUA, SIZE - 4096, 4096), &RW), None, "{c:?}");
        }
        assert_eq!(refusal(&req(Command::Flush, 0, 0, 0), &RW), None, "a flush has no length");
        assert_eq!(refusal(&req(Command::Disc, 0, 0, 0), &RW), None);
        assert_eq!(refusal(&req(Command::WriteZeroes, CMD_FLAG_FUA | CMD_FLAG_NO_HOLE, 0, 512), &RW), None);
        assert_eq!(refusal(&req(Command::BlockStatus, CMD_FLAG_REQ_ONE, 0, 4096), &BS), None);
    }

    #[test]
    fn unknown_commands_and_flags_a_command_does_not_take_are_einval() {
        assert_eq!(refusal(&req(Command::Other(42), 0, 0, 4096), &RW), Some(EINVAL));
        // NO_HOLE is write-zeroes' alone; REQ_ONE block status's alone.
        assert_eq!(refusal(&req(Command::Read, CMD_FLAG_NO_HOLE, 0, 4096), &RW), Some(EINVAL));
        assert_eq!(refusal(&req(Command::Write, CMD_FLAG_REQ_ONE, 0, 4096), &RW), Some(EINVAL));
        assert_eq!(refusal(&req(Command::WriteZeroes, CMD_FLAG_REQ_ONE, 0, 4096), &RW), Some(EINVAL));
        assert_eq!(refusal(&req(Command::BlockStatus, CMD_FLAG_FUA, 0, 4096), &BS), Some(EINVAL));
        // Block status only once base:allocation was negotiated.
        assert_eq!(refusal(&req(Command::BlockStatus, 0, 0, 4096), &RW), Some(EINVAL));
    }

    #[test]
    fn zero_lengths_are_einval_before_a_read_only_export_refuses_the_write() {
        for c in [Command::Read, Command::Write, Command::Trim, Command::WriteZeroes] {
            assert_eq!(refusal(&req(c, 0, 0, 0), &RW), Some(EINVAL), "{c:?}");
        }
        assert_eq!(refusal(&req(Command::Write, 0, 0, 0), &RO), Some(EINVAL));
    }

    #[test]
    fn a_read_only_export_refuses_every_write_and_serves_reads() {
        for c in [Command::Write, Command::Trim, Command::WriteZeroes] {
            assert_eq!(refusal(&req(c, 0, 0, 4096), &RO), Some(EPERM), "{c:?}");
            // Read-only is said before the range: a write past the end is EPERM too.
            assert_eq!(refusal(&req(c, 0, SIZE, 4096), &RO), Some(EPERM), "{c:?}");
        }
        assert_eq!(refusal(&req(Command::Read, 0, 0, 4096), &RO), None);
        assert_eq!(refusal(&req(Command::Flush, 0, 0, 0), &RO), None);
    }

    #[test]
    fn past_the_end_reads_are_einval_and_writes_enospc() {
        let over = SIZE - 4096 + 1;
        assert_eq!(refusal(&req(Command::Read, 0, over, 4096), &RW), Some(EINVAL));
        assert_eq!(refusal(&req(Command::Trim, 0, over, 4096), &RW), Some(EINVAL));
        assert_eq!(refusal(&req(Command::BlockStatus, 0, over, 4096), &BS), Some(EINVAL));
        assert_eq!(refusal(&req(Command::Write, 0, over, 4096), &RW), Some(ENOSPC));
        assert_eq!(refusal(&req(Command::WriteZeroes, 0, over, 4096), &RW), Some(ENOSPC));
        // An offset whose end overflows 64 bits is past the end, not a wrap to the start.
        assert_eq!(refusal(&req(Command::Read, 0, u64::MAX - 10, 4096), &RW), Some(EINVAL));
    }
}
