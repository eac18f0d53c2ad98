/**
 * TanStack Query's useMutation, with the functions of the latest render. useMutation hands new
 * options to its observer in an effect, which Preact runs after the next frame, so a form submitted
 * right after its last keystroke (Enter while typing, a password manager filling in and submitting)
 * would send the values of the render before. Here the mutation reads its functions from a ref set
 * while rendering.
 */
import { useMutation, type UseMutationOptions, type UseMutationResult } from '@tanstack/react-query';
import { useRef } from 'preact/hooks';

export function useAction<TData, TVariables = void>(
  options: UseMutationOptions<TData, Error, TVariables>,
): UseMutationResult<TData, Error, TVariables> {
  const latest = useRef(options);
  latest.current = options;
  return useMutation<TData, Error, TVariables>({
    ...options,
    mutationFn: (variables, context) => latest.current.mutationFn!(variables, context),
    onSuccess: (...args) => latest.current.onSuccess?.(...args),
    onError: (...args) => latest.current.onError?.(...args),
  });
}
