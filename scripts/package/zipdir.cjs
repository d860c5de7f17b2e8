// Zips a folder's contents (paths relative to it, files deflated) with Node alone, for
// package.sh on a machine without zip or python3:  node zipdir.cjs DIR OUT.zip
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');

const [dir, out] = process.argv.slice(2);
if (!dir || !out) {
  console.error('usage: node zipdir.cjs DIR OUT.zip');
  process.exit(2);
}
const files = [];
(function walk(rel) {
  for (const entry of fs.readdirSync(path.join(dir, rel), {withFileTypes: true}).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const name = rel ? `${rel}/${entry.name}` : entry.name;
    if (entry.isDirectory()) walk(name);
    else if (entry.isFile()) files.push(name);
  }
})('');

const chunks = [];
const central = [];
let offset = 0;
// 1980-01-01 00:00 in DOS time: the archive does not depend on when it was made.
const dosTime = 0, dosDate = (0 << 9) | (1 << 5) | 1;
for (const name of files) {
  const data = fs.readFileSync(path.join(dir, name));
  const deflated = zlib.deflateRawSync(data, {level: 9});
  const crc = zlib.crc32(data);
  const nameBytes = Buffer.from(name, 'utf8');
  const local = Buffer.alloc(30);
  local.writeUInt32LE(0x04034b50, 0);
  local.writeUInt16LE(20, 4); // version needed
  local.writeUInt16LE(0x0800, 6); // UTF-8 names
  local.writeUInt16LE(8, 8); // deflate
  local.writeUInt16LE(dosTime, 10);
  local.writeUInt16LE(dosDate, 12);
  local.writeUInt32LE(crc, 14);
  local.writeUInt32LE(deflated.length, 18);
  local.writeUInt32LE(data.length, 22);
  local.writeUInt16LE(nameBytes.length, 26);
  local.writeUInt16LE(0, 28);
  chunks.push(local, nameBytes, deflated);
  const entry = Buffer.alloc(46);
  entry.writeUInt32LE(0x02014b50, 0);
  entry.writeUInt16LE((3 << 8) | 20, 4); // made by: Unix
  entry.writeUInt16LE(20, 6);
  entry.writeUInt16LE(0x0800, 8);
  entry.writeUInt16LE(8, 10);
  entry.writeUInt16LE(dosTime, 12);
  entry.writeUInt16LE(dosDate, 14);
  entry.writeUInt32LE(crc, 16);
  entry.writeUInt32LE(deflated.length, 20);
  entry.writeUInt32LE(data.length, 24);
  entry.writeUInt16LE(nameBytes.length, 28);
  entry.writeUInt32LE((0o100644 << 16) >>> 0, 38); // external attributes: a regular file, 0644
  entry.writeUInt32LE(offset, 42);
  central.push(entry, nameBytes);
  offset += local.length + nameBytes.length + deflated.length;
}
const centralSize = central.reduce((n, b) => n + b.length, 0);
const end = Buffer.alloc(22);
end.writeUInt32LE(0x06054b50, 0);
end.writeUInt16LE(files.length, 8);
end.writeUInt16LE(files.length, 10);
end.writeUInt32LE(centralSize, 12);
end.writeUInt32LE(offset, 16);
fs.writeFileSync(out, Buffer.concat([...chunks, ...central, end]));
