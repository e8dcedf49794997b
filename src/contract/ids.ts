/** The shape of every id the API takes. */

/** Every id the API accepts: task ids, resume ids, workspace ids, inbox item ids. */
export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

export function isValidId(value: string): boolean {
  return ID_PATTERN.test(value);
}

/** An id made in creation order (`run_…`, `inb_…`): the prefix, 13 characters of time and counter, 16 of randomness. */
export const sortableIdPattern = (prefix: string) => new RegExp(`^${prefix}[0-9a-z]{13}[0-9a-f]{16}$`);
