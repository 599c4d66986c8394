//! The code object's location table (`co_linetable`), CPython 3.14 format
//! (InternalDocs/code_objects.md, "Format of the locations table"): entries
//! covering 1 to 8 code units each, a first byte `1cccclll` (code `cccc`,
//! length `lll + 1`) followed by code-specific data.

/// Line number of every code unit, `None` where the table says "no
/// location". Units past the end of the table get `None` too.
pub fn line_numbers(table: &[u8], first_line: i32, n_units: usize) -> Vec<Option<i32>> {
    let mut out = Vec::with_capacity(n_units);
    let mut line = first_line;
    let mut i = 0;
    while i < table.len() && out.len() < n_units {
        let head = table[i];
        i += 1;
        let code = (head >> 3) & 15;
        let len = (head & 7) as usize + 1;
        let this = match code {
            15 => None,
            14 => {
                line += read_svarint(table, &mut i);
                for _ in 0..3 {
                    read_varint(table, &mut i); // end line, column, end column
                }
                Some(line)
            }
            13 => {
                line += read_svarint(table, &mut i);
                Some(line)
            }
            10..=12 => {
                line += (code - 10) as i32;
                i += 2; // column, end column
                Some(line)
            }
            _ => {
                i += 1; // short form: columns only
                Some(line)
            }
        };
        for _ in 0..len.min(n_units - out.len()) {
            out.push(this);
        }
    }
    out.resize(n_units, None);
    out
}

fn read_varint(table: &[u8], i: &mut usize) -> u32 {
    let mut value = 0u32;
    let mut shift = 0;
    while let Some(&b) = table.get(*i) {
        *i += 1;
        value |= ((b & 63) as u32) << shift;
        shift += 6;
        if b & 64 == 0 {
            break;
        }
    }
    value
}

fn read_svarint(table: &[u8], i: &mut usize) -> i32 {
    let u = read_varint(table, i);
    if u & 1 != 0 {
        -((u >> 1) as i32)
    } else {
        (u >> 1) as i32
    }
}

#[cfg(test)]
mod tests {
    use super::line_numbers;

    #[test]
    fn forms() {
        // RESUME on the first line (short form), two units one line down
        // (one-line form), one unit without location, then a long form
        // going back three lines.
        let table = [
            0x80 | (0 << 3), 0x00,
            0x80 | (11 << 3) | 1, 0x00, 0x04,
            0x80 | (15 << 3),
            0x80 | (14 << 3), 7, 0, 1, 1,
        ];
        let lines = line_numbers(&table, 10, 6);
        assert_eq!(lines, vec![Some(10), Some(11), Some(11), None, Some(8), None]);
    }

    #[test]
    fn no_line_form_and_multi_byte_varint() {
        // Code 13 with a delta of +100: svarint 200 = 0b11001000, two chunks.
        let table = [0x80 | (13 << 3), 64 | (200 & 63) as u8, (200 >> 6) as u8];
        assert_eq!(line_numbers(&table, 1, 1), vec![Some(101)]);
    }
}
