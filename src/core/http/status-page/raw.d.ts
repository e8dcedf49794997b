/** A file built in as its text (tsup.config.ts; Vite does it natively). */
declare module '*?raw' {
  const text: string;
  export default text;
}
