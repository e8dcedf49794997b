// A process's CPU so far (user + system), in ms, from /proc (clock ticks of 10 ms): what the bench
// reads where a figure is the work a server did, not how fast the machine was at that moment.
import { readFileSync } from 'node:fs';

export const cpuMs = (pid) => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
};
