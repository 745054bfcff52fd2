//! The smallest FreeBSD program pkg(8) reads an ABI from: a 64-bit ELF
//! header, one PT_NOTE program header, and the `FreeBSD` ABI-tag note
//! (namesz 8, descsz 4, type 1 = NT_FREEBSD_ABI_TAG, `__FreeBSD_version`),
//! written from the ELF specification and FreeBSD's `<sys/elf_common.h>`.

/// ELF machine numbers (e_machine).
pub const EM_X86_64: u16 = 62;
pub const EM_AARCH64: u16 = 183;
pub const EM_PPC64: u16 = 21;

/// An ELF file for `machine` whose ABI note says `osversion`
/// (`little`: byte order; `note_name`: normally `FreeBSD`).
pub fn freebsd_elf(machine: u16, little: bool, osversion: u32, note_name: &str) -> Vec<u8> {
    let u16b = |v: u16| {
        if little {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        }
    };
    let u32b = |v: u32| {
        if little {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        }
    };
    let u64b = |v: u64| {
        if little {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        }
    };
    let mut f = Vec::new();
    f.extend_from_slice(b"\x7fELF");
    f.push(2); // ELFCLASS64
    f.push(if little { 1 } else { 2 });
    f.push(1); // EV_CURRENT
    f.push(9); // ELFOSABI_FREEBSD
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&u16b(2)); // ET_EXEC
    f.extend_from_slice(&u16b(machine));
    f.extend_from_slice(&u32b(1));
    f.extend_from_slice(&u64b(0)); // entry
    f.extend_from_slice(&u64b(64)); // phoff
    f.extend_from_slice(&u64b(0)); // shoff
    f.extend_from_slice(&u32b(0)); // flags
    f.extend_from_slice(&u16b(64));
    f.extend_from_slice(&u16b(56));
    f.extend_from_slice(&u16b(1));
    f.extend_from_slice(&u16b(64));
    f.extend_from_slice(&u16b(0));
    f.extend_from_slice(&u16b(0));
    assert_eq!(f.len(), 64);
    let mut name = note_name.as_bytes().to_vec();
    name.push(0);
    let namesz = name.len() as u32;
    while name.len() % 4 != 0 {
        name.push(0);
    }
    let mut note = Vec::new();
    note.extend_from_slice(&u32b(namesz));
    note.extend_from_slice(&u32b(4));
    note.extend_from_slice(&u32b(1));
    note.extend_from_slice(&name);
    note.extend_from_slice(&u32b(osversion));
    f.extend_from_slice(&u32b(4)); // PT_NOTE
    f.extend_from_slice(&u32b(4)); // PF_R
    f.extend_from_slice(&u64b(120));
    f.extend_from_slice(&u64b(0));
    f.extend_from_slice(&u64b(0));
    f.extend_from_slice(&u64b(note.len() as u64));
    f.extend_from_slice(&u64b(note.len() as u64));
    f.extend_from_slice(&u64b(4));
    assert_eq!(f.len(), 120);
    f.extend_from_slice(&note);
    f
}
