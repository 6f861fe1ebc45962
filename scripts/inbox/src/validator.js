// An @rjsf/utils `ValidatorType` on @cfworker/json-schema, which interprets JSON Schema without
// generating code: the inbox's Content-Security-Policy has no 'unsafe-eval', and rjsf's default
// validator (ajv) compiles each schema with `new Function`.
import { Validator } from '@cfworker/json-schema';
import { plain } from './exact.js';
import {
  createErrorHandler,
  getDefaultFormState,
  toErrorSchema,
  unwrapErrorHandler,
  validationDataMerge,
} from '@rjsf/utils';

const DRAFT = '2020-12'; // pydantic's JSON Schemas are 2020-12

// Keywords whose error only says that a sub-schema failed: the sub-schema's own error is reported.
const WRAPPERS = new Set(['properties', 'items', 'prefixItems', 'allOf', '$ref', '$recursiveRef', 'additionalItems', 'patternProperties', 'unevaluatedItems', 'dependentSchemas']);

/** `#/a/0/b` (a JSON pointer in a URI fragment) -> ['a', '0', 'b']. */
export function pointerPath(location) {
  const pointer = location.replace(/^#/, '');
  if (!pointer) return [];
  return pointer
    .slice(1)
    .split('/')
    .map((part) => decodeURIComponent(part).replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** A path as rjsf's `property` (JavaScript accessor notation: `.a[0]['b c']`). */
export function accessor(path) {
  return path
    .map((part) => {
      if (/^\d+$/.test(part)) return `[${part}]`;
      if (/^[A-Za-z_$][\w$]*$/.test(part)) return `.${part}`;
      return `['${part.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}']`;
    })
    .join('');
}

const cache = new Map();

function validatorFor(schema, rootSchema) {
  const key = JSON.stringify([schema, rootSchema === schema ? null : rootSchema]);
  let validator = cache.get(key);
  if (!validator) {
    // a sub-schema's `#/$defs/...` references point into the root schema: carry its definitions
    let own = schema;
    if (rootSchema && rootSchema !== schema && typeof schema === 'object') {
      own = { ...schema };
      for (const defs of ['$defs', 'definitions']) {
        if (rootSchema[defs]) own[defs] = { ...rootSchema[defs], ...(schema[defs] || {}) };
      }
    }
    validator = new Validator(own, DRAFT, false);
    cache.set(key, validator);
  }
  return validator;
}

function toRjsfErrors(outputErrors) {
  const errors = [];
  for (const error of outputErrors) {
    if (WRAPPERS.has(error.keyword)) continue;
    const path = pointerPath(error.instanceLocation);
    let message = error.error.replace(/^Instance /, 'Value ');
    if (error.keyword === 'required') {
      const missing = /"(.*)"/.exec(error.error);
      if (missing) {
        path.push(missing[1]);
        message = 'is required';
      }
    }
    const property = accessor(path);
    errors.push({
      name: error.keyword,
      property,
      message,
      params: {},
      schemaPath: error.keywordLocation,
      stack: `${property || '.'} ${message}`.trim(),
    });
  }
  return errors;
}

/** `value`'s problems against the JSON Schema `schema`, `[{path, message}]` as the server's
 * InvalidToolArguments lists them (empty: valid). Numbers kept exactly (exact.js) are checked as
 * their nearest doubles: the server checks them exactly. */
export function schemaProblems(schema, value) {
  const raw = cfworkerValidator.rawValidation(schema, value);
  if (raw.validationError) return [{ path: [], message: `the schema cannot be used: ${raw.validationError.message || raw.validationError}` }];
  const problems = [];
  for (const error of raw.errors) {
    if (WRAPPERS.has(error.keyword)) continue;
    const path = pointerPath(error.instanceLocation);
    let message = error.error.replace(/^Instance /, 'Value ');
    const missing = error.keyword === 'required' && /"(.*)"/.exec(error.error);
    if (missing) {
      path.push(missing[1]);
      message = 'is required';
    }
    problems.push({ path, message });
  }
  return problems;
}

export const cfworkerValidator = {
  rawValidation(schema, formData) {
    try {
      const own = plain(schema);
      const result = validatorFor(own, own).validate(formData === undefined ? null : plain(formData));
      return { errors: result.valid ? [] : result.errors };
    } catch (validationError) {
      return { errors: [], validationError };
    }
  },

  validateFormData(formData, schema, customValidate, transformErrors, uiSchema) {
    const raw = this.rawValidation(schema, formData);
    let errors = toRjsfErrors(raw.errors || []);
    if (raw.validationError) errors.push({ stack: String(raw.validationError.message || raw.validationError) });
    if (typeof transformErrors === 'function') errors = transformErrors(errors, uiSchema);
    let errorSchema = toErrorSchema(errors);
    if (raw.validationError) errorSchema = { ...errorSchema, $schema: { __errors: [String(raw.validationError.message)] } };
    if (typeof customValidate !== 'function') return { errors, errorSchema };
    const newFormData = getDefaultFormState(this, schema, formData, schema, true);
    const handler = customValidate(newFormData, createErrorHandler(newFormData), uiSchema);
    return validationDataMerge({ errors, errorSchema }, unwrapErrorHandler(handler));
  },

  isValid(schema, formData, rootSchema) {
    try {
      const own = plain(schema);
      return validatorFor(own, rootSchema === schema ? own : plain(rootSchema)).validate(formData === undefined ? null : plain(formData)).valid;
    } catch {
      return false;
    }
  },
};
