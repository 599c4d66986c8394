//! Disassembly of compiled code for `ember.dis()`, through iced-x86 and
//! yaxpeax-arm (one of the few ISA-aware files).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    X86_64,
    Aarch64,
}

impl Isa {
    pub fn host() -> Isa {
        if cfg!(target_arch = "aarch64") {
            Isa::Aarch64
        } else {
            Isa::X86_64
        }
    }
}

/// One line per instruction: (address, bytes, text).
pub fn disassemble(isa: Isa, code: &[u8], addr: u64) -> Vec<(u64, Vec<u8>, String)> {
    match isa {
        Isa::X86_64 => x86_64(code, addr),
        Isa::Aarch64 => aarch64(code, addr),
    }
}

fn x86_64(code: &[u8], addr: u64) -> Vec<(u64, Vec<u8>, String)> {
    use iced_x86::{Decoder, DecoderOptions, Formatter, IntelFormatter};
    let mut decoder = Decoder::with_ip(64, code, addr, DecoderOptions::NONE);
    let mut formatter = IntelFormatter::new();
    let mut out = Vec::new();
    while decoder.can_decode() {
        let ip = decoder.ip();
        let ins = decoder.decode();
        let mut text = String::new();
        formatter.format(&ins, &mut text);
        let start = (ip - addr) as usize;
        out.push((ip, code[start..start + ins.len()].to_vec(), text));
    }
    out
}

fn aarch64(code: &[u8], addr: u64) -> Vec<(u64, Vec<u8>, String)> {
    use yaxpeax_arch::{Decoder, U8Reader};
    let decoder = yaxpeax_arm::armv8::a64::InstDecoder::default();
    code.chunks(4)
        .enumerate()
        .map(|(i, word)| {
            let mut reader = U8Reader::new(word);
            let text = match decoder.decode(&mut reader) {
                Ok(ins) => ins.to_string(),
                Err(e) => format!("(undecodable: {e})"),
            };
            (addr + 4 * i as u64, word.to_vec(), text)
        })
        .collect()
}
