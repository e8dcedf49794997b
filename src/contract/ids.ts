/** The shape of every id the API takes. */

/** Every id the API accepts: task ids, resume ids, workspace ids, inbox item ids. */
export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

export function isValidId(value: string): boolean {
  return ID_PATTERN.test(value);
}
