/**
 * @module A run's structured output (docs/structured-output.md): the caller's JSON Schema, checked
 * with Ajv (strict) when the run is started and applied to the agent's answer when it ends. The
 * answer comes from the CLI's own structured output where it has one (claude, codex, qwen), else
 * from the agent's `headless-inbox result` call, for which its prompt is told how.
 */
import type { Ajv, ErrorObject, ValidateFunction } from 'ajv';
import { onFirstUse } from '../util/first-use';

/** A schema's size at most, as JSON. */
export const OUTPUT_SCHEMA_MAX = 32_768;

const ajvPackage = onFirstUse<typeof import('ajv')>('ajv');
const formatsPackage = onFirstUse<typeof import('ajv-formats')>('ajv-formats');
let ajv: Ajv | undefined;

/** One Ajv (strict, every error, the standard formats), made when the first schema is checked. */
function checker(): Ajv {
  if (!ajv) {
    ajv = new (ajvPackage().Ajv)({ strict: true, allErrors: true });
    formatsPackage().default(ajv);
  }
  return ajv;
}

const compiled = new WeakMap<object, ValidateFunction>();

/** The validator of a schema; throws, saying why, on one Ajv (strict) refuses. */
export function compileSchema(schema: object): ValidateFunction {
  const known = compiled.get(schema);
  if (known) return known;
  const validate = checker().compile(schema);
  compiled.set(schema, validate);
  return validate;
}

/** Why a schema cannot be used, or undefined. */
export function schemaProblem(schema: unknown): string | undefined {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return 'it must be a JSON Schema object';
  if (JSON.stringify(schema).length > OUTPUT_SCHEMA_MAX) return `it must be at most ${OUTPUT_SCHEMA_MAX} characters as JSON`;
  try {
    compileSchema(schema);
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

const said = (errors: ErrorObject[] | null | undefined) =>
  (errors ?? [])
    .slice(0, 5)
    .map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`)
    .join('; ');

/** The agent's answer against the schema: its value, or what is wrong with it. */
export function judgeAnswer(schema: object, answer: { value: unknown } | undefined): { value: unknown } | { problem: string } {
  if (answer === undefined) return { problem: 'the agent gave no structured answer' };
  const validate = compileSchema(schema);
  return validate(answer.value) ? { value: answer.value } : { problem: `its answer does not match outputSchema: ${said(validate.errors)}` };
}

/** The answer in an agent's final text, for a CLI whose structured output is its last message (codex). */
export function answerInText(text: string | undefined): { value: unknown } | undefined {
  if (text === undefined) return undefined;
  try {
    return { value: JSON.parse(text.trim()) };
  } catch {
    return undefined;
  }
}

/** What the prompt of an agent without native structured output is told. */
export function resultInstructions(schema: object): string {
  return [
    '',
    '---',
    'When you are done, give your final answer as JSON matching this JSON Schema, by running this command once (your answer as one argument):',
    `headless-inbox result '<your JSON answer>'`,
    'It says whether the answer matches; if it does not, fix it and run it again.',
    `JSON Schema: ${JSON.stringify(schema)}`,
  ].join('\n');
}

/** The prompt of the one repair turn, on the same Session, after an answer that was missing or did not match. */
export function repairPrompt(problem: string, schema: object, native: boolean): string {
  const how = native ? 'as your structured output' : `by running: headless-inbox result '<your JSON answer>'`;
  return `Your final answer could not be used: ${problem}. Give it again, ${how}, matching this JSON Schema exactly: ${JSON.stringify(schema)}`;
}
