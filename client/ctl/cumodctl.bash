# SPDX-License-Identifier: MIT
# bash completion for cumodctl: its commands and options, module names
# and MODULE:KERNEL (from `cumodctl __complete modules` and `cumodctl
# __complete kernels MODULE`, plain lines), asking the daemon at the URL
# given on the line, else $CUMOD_URL. It runs the cumodctl being completed
# (./build/client/cumodctl as well as one on PATH). Installed as
# share/bash-completion/completions/cumodctl.

_cumodctl_ask()
{
    # The daemon's answer to "cumodctl [--url URL] __complete ARGS", quickly.
    local url=() exe=${_cumodctl_exe:-cumodctl}
    [[ -n $_cumodctl_url ]] && url=(--url "$_cumodctl_url")
    [[ $exe == "~/"* ]] && exe=$HOME/${exe#"~/"}
    command "$exe" "${url[@]}" "${_cumodctl_tls[@]}" --timeout 1000 \
        __complete "$@" 2> /dev/null
}

_cumodctl_modules()
{
    _cumodctl_ask modules
}

_cumodctl_kernels()
{
    # Kernel names of module $1, as MODULE:KERNEL.
    _cumodctl_ask kernels "$1"
}

_cumodctl_kernel_given()
{
    # Whether launch or carveout (at $1) has its MODULE:KERNEL before the
    # word being completed.
    local k
    for ((k = $1 + 1; k < cword; k++)); do
        case ${words[k]} in
        --grid | --block | --shared | --generation | --deadline | --cluster | \
            --carveout) ((k++)) ;;
        -*) ;;
        *) return 0 ;;
        esac
    done
    return 1
}

_cumodctl()
{
    local cur prev words cword
    if declare -F _init_completion > /dev/null; then
        _init_completion -n : || return
    else
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD - 1]}
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    fi
    local commands="status ls show load unload pin unpin reload unquarantine
        launch global carveout watch gemm top"
    local options="--url --json --timeout --device --tls-ca --tls-cert
        --tls-key --help --version"

    # The URL and the command word, as cumodctl finds them; the program is
    # the one being completed (bash gives it as $1).
    local _cumodctl_exe=${1:-${words[0]}}
    local i ci=0 cmd="" _cumodctl_url=${CUMOD_URL:-} _cumodctl_tls=()
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
        -u | --url) _cumodctl_url=${words[i + 1]}; ((i++)) ;;
        --tls-ca | --tls-cert | --tls-key)
            _cumodctl_tls+=("${words[i]}" "${words[i + 1]}"); ((i++)) ;;
        --url=*) _cumodctl_url=${words[i]#--url=} ;;
        -t | --timeout | -d | --device) ((i++)) ;;
        -*) ;;
        *) cmd=${words[i]}; ci=$i; break ;;
        esac
    done

    case $prev in
    --tls-ca | --tls-cert | --tls-key)
        COMPREPLY=($(compgen -f -- "$cur"))
        return ;;
    -u | --url | -t | --timeout | -d | --device | --grid | --block | --shared | \
        --generation | --deadline | --cluster | --carveout | --offset | \
        --length | --set | --batch | --repeat)
        return ;;
    --c-type)
        COMPREPLY=($(compgen -W "fp32 fp64 fp16 bf16" -- "$cur"))
        return ;;
    --type)
        COMPREPLY=($(compgen -W "hex f32 f64 i32 u32" -- "$cur"))
        return ;;
    esac

    if [[ -z $cmd ]]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "$options" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "$commands" -- "$cur"))
        fi
        return
    fi
    case $cmd in
    load)
        [[ $cur == -* ]] && { COMPREPLY=($(compgen -W "$options --jit-opt-level
            --jit-max-registers --jit-line-info --jit-fast-compile" -- "$cur")); return; }
        [[ $prev == --jit-* ]] && { COMPREPLY=($(compgen -W "0 1 2 3 4 default" -- "$cur")); return; }
        COMPREPLY=($(compgen -W "$(_cumodctl_modules)" -- "$cur")) ;;
    show | unload | pin | unpin | reload | unquarantine)
        [[ $cur == -* ]] && { COMPREPLY=($(compgen -W "$options" -- "$cur")); return; }
        COMPREPLY=($(compgen -W "$(_cumodctl_modules)" -- "$cur")) ;;
    launch | carveout)
        if [[ $cur == -* ]]; then
            if [[ $cmd == launch ]]; then
                COMPREPLY=($(compgen -W "--grid --block --shared --generation
                    --deadline --cluster --cooperative --carveout --json" \
                    -- "$cur"))
            else
                COMPREPLY=($(compgen -W "--json" -- "$cur"))
            fi
        elif ! _cumodctl_kernel_given "$ci"; then
            if [[ $cur == *:* ]]; then
                COMPREPLY=($(compgen -W "$(_cumodctl_kernels "${cur%%:*}")" -- "$cur"))
            else
                COMPREPLY=($(compgen -S : -W "$(_cumodctl_modules)" -- "$cur"))
                compopt -o nospace 2> /dev/null
            fi
            # bash splits words at ':'; keep what is before it typed.
            if declare -F __ltrim_colon_completions > /dev/null; then
                __ltrim_colon_completions "$cur"
            elif [[ $cur == *:* && $COMP_WORDBREAKS == *:* ]]; then
                local pre=${cur%"${cur##*:}"}
                COMPREPLY=("${COMPREPLY[@]#"$pre"}")
            fi
        elif [[ $cmd == carveout ]]; then
            COMPREPLY=($(compgen -W "default" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "i32: u32: i64: u64: f32: f64: hex: buf:" -- "$cur"))
            compopt -o nospace 2> /dev/null
        fi ;;
    global)
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "--type --offset --length --set --json" -- "$cur"))
        elif [[ $prev == global ]]; then
            COMPREPLY=($(compgen -W "$(_cumodctl_modules)" -- "$cur"))
        fi ;;
    status | ls)
        [[ $cur == -* ]] && COMPREPLY=($(compgen -W "$options" -- "$cur")) ;;
    watch)
        [[ $prev == --count ]] && return
        [[ $cur == -* ]] && COMPREPLY=($(compgen -W "--json --all --count" -- "$cur")) ;;
    top)
        [[ $prev == --interval ]] && return
        [[ $cur == -* ]] && COMPREPLY=($(compgen -W "--json --interval" -- "$cur")) ;;
    gemm)
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "--batch --transa --transb --c-type
                --repeat --json" -- "$cur"))
        elif [[ $prev == gemm ]]; then
            COMPREPLY=($(compgen -W "fp32 fp64 fp16 bf16" -- "$cur"))
        fi ;;
    esac
}
complete -F _cumodctl cumodctl
